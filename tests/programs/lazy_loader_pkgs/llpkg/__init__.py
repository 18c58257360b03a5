"""Package made lazy with lazy_loader.attach (scikit-image / SciPy style):
submodules and some of their functions are imported on first access through
the PEP 562 __getattr__ that lazy_loader builds."""
import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submodules=["linalg"],
    submod_attrs={"filters": ["gaussian", "median"]},
)
