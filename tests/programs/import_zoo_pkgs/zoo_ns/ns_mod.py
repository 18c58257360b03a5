"""Child of a namespace package (zoo_ns has no __init__.py)."""
NS = "namespace"
