child_value = 1
