"""Previews: a URL that opens, in a browser and without the API key, a web
app a session serves on a port (a server started with ``--preview``).

>>> with PyExec() as px, px.session() as s:
...     _ = s.execute("import subprocess; subprocess.Popen(['python', '-m', 'http.server', '8000'])")
...     share = s.share_port(8000)  # share.url, share.expires_at
...     s.revoke_port(8000)         # every URL of the port stops working
1

A session of another key is not found (NotFoundError); a server without
``--preview`` answers 501 (APIError).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Optional
from urllib.parse import urlsplit, urlunsplit

from .types import parse_time


@dataclass(frozen=True)
class PortShare:
    """A preview URL of a session's port: ``url`` opens the app until
    ``expires_at``, a revoke or the session's end. ``isolation`` says how
    the app is kept from the API's origin: sandbox, preview_host or
    per_preview (docs/preview.md)."""

    url: str
    session_id: str
    port: int
    expires_at: Optional[datetime] = None
    isolation: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base_url: str) -> "PortShare":
        url = str(data["url"])
        if url.startswith("/"):
            url = without_userinfo(base_url) + url
        return cls(url=url, session_id=data.get("session_id") or "", port=int(data.get("port") or 0),
                   expires_at=parse_time(data.get("expires_at")), isolation=data.get("isolation") or "")


def without_userinfo(base_url: str) -> str:
    """base_url without a ``user:password@`` it may carry: a preview URL is
    made to be handed on, the client's credentials are not."""
    u = urlsplit(base_url)
    if u.username is None and u.password is None:
        return base_url.rstrip("/")
    host = u.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if u.port is not None:
        host += f":{u.port}"
    return urlunsplit((u.scheme, host, u.path, u.query, u.fragment)).rstrip("/")


def port_path(session_path: str, port: int) -> str:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port {port!r} is not a TCP port (1-65535)")
    return f"{session_path}/ports/{port}/share"
