"""Optional dependencies, each with a fallback."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

try:
    import ujson as json
except ImportError:  # the standard library will do
    import json

try:
    from lxml import etree
except (ImportError, AttributeError):
    etree = None

try:
    import orjson
except ModuleNotFoundError as exc:
    orjson = None
else:
    import orjson.extras
finally:
    import atexit

try:
    import simplejson
except ValueError:
    simplejson = None

if TYPE_CHECKING:
    import pandas as pd
    from numpy.typing import NDArray
elif sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

if typing_available := True:
    import typing_extensions

def load(path: str) -> "pd.DataFrame":
    with open(path, "rb") as fh:
        return tomllib.load(fh)
