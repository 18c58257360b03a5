HELP = "help"
