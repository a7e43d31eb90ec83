import importlib
import importlib as il
from importlib import import_module, import_module as load_module

toml = __import__("toml")
yaml = importlib.import_module('yaml')
rich = il.import_module("rich.console")
attr = import_module("attrs")
dateutil = load_module(("dateutil" ".parser"), package=None)
rel = importlib.import_module(".sibling", package="pkg")
name = "computed"
dyn = __import__(name)
also_not = __import__(f"x{name}")
bytes_not = __import__(b"zlib".decode())
nested = __import__(("tabulate"))
kw_not = __import__(name="msgpack")

def plugin(kind):
    return importlib.import_module("plugins." + kind)
