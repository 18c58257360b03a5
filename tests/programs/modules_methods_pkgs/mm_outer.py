# Imports a module and takes it out of sys.modules again through a dict method, all
# within this module's own import.
import sys

import mm_inner

sys.modules.pop("mm_inner")
