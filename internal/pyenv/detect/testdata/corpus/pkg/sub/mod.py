from ... import something_relative
from ..core import run as core_run
import attr
thing = attr.s(auto_attribs=True)(type("Thing", (), {}))
