from .core import run
from . import helpers
from .sub.mod import thing as other
import pkg_external_dep
__all__ = ["run", "helpers", "other"]
