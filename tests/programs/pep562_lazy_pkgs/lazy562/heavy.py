VALUE = "heavy loaded"
