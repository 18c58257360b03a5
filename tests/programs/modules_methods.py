"""sys.modules changed through dict methods (no `sys.modules[k] = v` statement): 3.12+
sees them at once (dict watcher); 3.8-3.11 find them at the next import boundary, by
comparing against the tracer's shadow. Each change is followed by a top-level import."""
import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "modules_methods_pkgs"))

import colorsys
import json
import csv

fake = types.ModuleType("colorsys")
fake.fake = True
sys.modules.update({"colorsys": fake})   # an existing key replaced
import decimal

sys.modules.pop("json")                  # an existing key removed
import fractions

sys.modules.setdefault("made_up", types.ModuleType("made_up"))  # a key added
import statistics

m = sys.modules.pop("csv")               # popped and put back: no change at all
sys.modules.update({"csv": m})
import uuid

import mm_outer                          # imports mm_inner, then pops it

print(sorted(k for k in ("colorsys", "json", "csv", "made_up", "mm_inner") if k in sys.modules))
print(sys.modules["colorsys"].fake)
