VALUE = "other loaded"
