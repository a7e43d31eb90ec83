# /// script
# requires-python = ">=3.9"
# dependencies = [
#   "httpx>=0.27",
#   "rich",
# ]
# ///
import httpx
from rich import print as rprint

rprint(httpx.get("https://example.org").status_code)
