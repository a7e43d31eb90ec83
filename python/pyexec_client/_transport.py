"""The transport the helpers of both clients talk through: the request
method PyExec and AsyncPyExec each have, as typing Protocols.

Sessions and the files mixins need only this much of a client, so they
import this module and never a client: the clients import them, and the
import graph has no circle (tests/test_imports.py checks it). Nothing here
does I/O."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Protocol

import httpx

#: Seconds between polls when an event stream broke off while waiting.
POLL_INTERVAL = 0.5


class Transport(Protocol):
    """What a synchronous client offers its helpers: one request whose
    error answers are raised as APIError."""

    base_url: str

    def _request(self, method: str, path: str, **kw: Any) -> httpx.Response: ...


class AsyncTransport(Protocol):
    """What an asynchronous client offers its helpers: one awaitable
    request (errors raised as APIError) and the creation of a session,
    which may stream its install progress to ``on_install``."""

    base_url: str

    async def _request(self, method: str, path: str, **kw: Any) -> httpx.Response: ...

    async def _create_session(self, body: Dict[str, Any], on_install: Optional[Callable[[str], None]]) -> str: ...
