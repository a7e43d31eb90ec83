import json, re, sys
from urllib.parse import urljoin
import requests
from bs4 import BeautifulSoup as Soup

BASE = "https://example.org/"

def links(html: str, base: str = BASE) -> list[str]:
    soup = Soup(html, "html.parser")
    return sorted({urljoin(base, a["href"]) for a in soup.find_all("a", href=True)})

def fetch(url, *, timeout=5.0):
    resp = requests.get(url, timeout=timeout, headers={"User-Agent": "pyexec-corpus"})
    resp.raise_for_status()
    return resp.text

if __name__ == "__main__":
    page = "<a href='/a'>a</a><a href=\"b\">b</a>"
    found = links(page)
    json.dump({"links": found, "n": len(found)}, sys.stdout, indent=2)
    print(re.sub(r"\s+", " ", " text  with   spaces "))
