"""Stateful sessions: a Python interpreter that keeps its variables,
imports and files between cells, like a notebook kernel.

>>> with PyExec() as px, px.session() as s:
...     _ = s.execute("x = 20")
...     s.execute("x + 22").result
'42'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union
from urllib.parse import quote

from ._common import config
from ._transport import AsyncTransport, Transport
from .errors import error_for_status
from .previews import PortShare, port_path
from .snapshots import SnapshotSaved
from .types import ExecutionResult


@dataclass(frozen=True)
class RestoredFrom:
    """The checkpoint a session resumed from after its node was lost, and
    how many cells ran after it (their effects are gone), and the session's
    execution count at the checkpoint: every cell numbered above it before
    this one is lost (cells_lost may undercount them)."""

    snapshot_id: str
    cells_lost: int
    checkpoint_execution_count: int = 0


@dataclass(frozen=True)
class CellResult(ExecutionResult):
    """The outcome of a cell: an ExecutionResult plus the session's
    counters. ``session_ended`` says the session did not survive the cell
    (its interpreter died, or a timed-out cell ignored its interrupt);
    ``resumed`` that the session was hibernated and resumed for it (what a
    snapshot skips, threads and open files, did not survive);
    ``restored_from``, on the first cell of a session whose node was lost,
    the checkpoint it resumed from."""

    execution_count: int = 0
    session_id: str = ""
    session_ended: bool = False
    resumed: bool = False
    restored_from: Optional[RestoredFrom] = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CellResult":
        base = ExecutionResult.from_dict(data)
        fields = {k: getattr(base, k) for k in base.__dataclass_fields__}
        return cls(**fields, execution_count=data.get("execution_count") or 0,
                   session_id=data.get("session_id") or "", session_ended=bool(data.get("session_ended")),
                   resumed=bool(data.get("resumed")), restored_from=_restored_from(data.get("restored_from")))


def _restored_from(raw: Any) -> Optional[RestoredFrom]:
    if not raw:
        return None
    return RestoredFrom(snapshot_id=raw.get("snapshot_id") or "", cells_lost=int(raw.get("cells_lost") or 0),
                        checkpoint_execution_count=int(raw.get("checkpoint_execution_count") or 0))


#: A session's requirements: requirements.txt text, or one requirement an
#: entry (``["polars", "requests==2.32.3"]``).
Requirements = Union[str, Sequence[str], None]


def requirements_text(requirements: Requirements) -> Optional[str]:
    """The requirements.txt text of a session's requirements."""
    if requirements is None or isinstance(requirements, str):
        return requirements
    lines = [r.strip() for r in requirements]
    for r in lines:
        if not r or "\n" in r or "\r" in r:
            raise ValueError(f"requirement {r!r} is not one requirement; give one per entry")
    return "\n".join(lines) + "\n" if lines else None


@dataclass
class CreateStreamDecoder:
    """Reads the answer of POST /api/v1/sessions with ``Accept:
    text/event-stream`` line by line: ``install`` events go to
    ``on_install``; ``feed`` returns the session's id from the final
    ``session`` event and raises the APIError the plain call would have
    raised for an ``error`` event."""

    on_install: Callable[[str], None]
    _event: str = ""
    _data: Optional[List[str]] = None

    def feed(self, line: str) -> Optional[str]:
        if line.startswith(":"):
            return None
        if line != "":
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                self._event = value
            elif name == "data":
                self._data = (self._data or []) + [value]
            return None
        event, data = self._event, self._data
        self._event, self._data = "", None
        if data is None:
            return None
        payload = json.loads("\n".join(data))
        if event == "install":
            self.on_install(str(payload.get("data", "")))
        elif event == "session":
            return str(payload["session_id"])
        elif event == "error":
            raise error_for_status(int(payload.get("status") or 500), str(payload.get("error") or "session create failed"),
                                   None)
        return None


def create_body(python_version: Optional[str], requirements: Requirements, env: Optional[Mapping[str, str]],
                memory_mb: Optional[int], disk_mb: Optional[int], cpu_shares: Optional[int],
                network: Any, idle_timeout_seconds: Optional[int],
                max_lifetime_seconds: Optional[int], workspace: Optional[str] = None,
                workspace_mode: Optional[str] = None,
                from_snapshot: Optional[str] = None,
                secrets: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """The JSON of POST /api/v1/sessions; None leaves the server's default
    (the snapshot's, with from_snapshot). ``network`` and ``secrets`` are as
    for an execution (a list of destinations narrows the network; secrets
    ask for network): the session has an egress of its own for its life."""
    net = config(None, None, None, None, network, secrets) or {}
    body: Dict[str, Any] = {
        "python_version": python_version, "requirements": requirements_text(requirements), "env_vars": dict(env) if env else None,
        "memory_mb": memory_mb, "disk_mb": disk_mb, "cpu_shares": cpu_shares,
        "network_disabled": net.get("network_disabled"), "network": net.get("network"), "secrets": net.get("secrets"),
        "idle_timeout_seconds": idle_timeout_seconds, "max_lifetime_seconds": max_lifetime_seconds,
        "workspace": workspace, "workspace_mode": workspace_mode,
        "from_snapshot": from_snapshot,
    }
    return {k: v for k, v in body.items() if v is not None}


def cell_body(code: str, eval_last_expr: bool, timeout_seconds: Optional[int]) -> Dict[str, Any]:
    body: Dict[str, Any] = {"code": code, "eval_last_expr": eval_last_expr}
    if timeout_seconds is not None:
        body["timeout_seconds"] = timeout_seconds
    return body


def session_path(session_id: str) -> str:
    return "/api/v1/sessions/" + quote(session_id, safe="")


def file_path(session_id: str, path: str) -> str:
    return session_path(session_id) + "/files/" + quote(path.lstrip("/"), safe="/")


class Session:
    """A live session of a PyExec client; ``with`` ends it on exit.

    Create it with ``PyExec.session(...)``, or attach to an existing one
    with ``Session(px, session_id)``.
    """

    def __init__(self, px: Transport, session_id: str) -> None:
        self._px = px
        self.id = session_id

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def execute(self, code: str, *, eval_last_expr: bool = True, timeout_seconds: Optional[int] = None) -> CellResult:
        """Run a cell. A Python exception is a result (``exit_code == 1``)."""
        resp = self._px._request("POST", session_path(self.id) + "/execute",
                                 json=cell_body(code, eval_last_expr, timeout_seconds))
        return CellResult.from_dict(resp.json())

    def info(self) -> Dict[str, Any]:
        """State (idle, busy or hibernated), execution count, last activity,
        memory in use."""
        return self._px._request("GET", session_path(self.id)).json()

    def snapshot(self) -> SnapshotSaved:
        """Save the session's variables, imports and files as a snapshot of
        your key; ``px.session(from_snapshot=...)`` restores it, later or on
        another server of the fleet. The session goes on unchanged."""
        return SnapshotSaved.from_dict(self._px._request("POST", session_path(self.id) + "/snapshot").json())

    def fork(self) -> "Session":
        """A new session holding a copy of this one's variables and files;
        the two then diverge."""
        return Session(self._px, self._px._request("POST", session_path(self.id) + "/fork").json()["session_id"])

    def share_port(self, port: int) -> PortShare:
        """A preview URL of the web app the session serves on ``port``: it
        opens the app in a browser without the API key until it expires,
        is revoked or the session ends. Needs a server with --preview."""
        resp = self._px._request("POST", port_path(session_path(self.id), port))
        return PortShare.from_dict(resp.json(), self._px.base_url)

    def revoke_port(self, port: int) -> int:
        """Revoke every preview URL of ``port``; returns how many still
        worked."""
        return int(self._px._request("DELETE", port_path(session_path(self.id), port)).json()["revoked"])

    def interrupt(self) -> None:
        """Raise KeyboardInterrupt in the running cell (from another thread)."""
        self._px._request("POST", session_path(self.id) + "/interrupt")

    def restart(self) -> Dict[str, Any]:
        """A fresh interpreter: variables are gone, files are kept."""
        return self._px._request("POST", session_path(self.id) + "/restart").json()

    def upload(self, path: str, data: bytes) -> None:
        """Write a file into the session's workspace."""
        self._px._request("PUT", file_path(self.id, path), content=data)

    def download(self, path: str) -> bytes:
        """Read a file of the session's workspace."""
        return self._px._request("GET", file_path(self.id, path)).content

    def files(self) -> List[Dict[str, Any]]:
        """The files of the session's workspace: path, size, modified."""
        return self._px._request("GET", session_path(self.id) + "/files").json()["files"]

    def close(self) -> None:
        """End the session (its interpreter, jail and files)."""
        self._px._request("DELETE", session_path(self.id))


class AsyncSession:
    """A session of an AsyncPyExec client: ``async with px.session() as s``
    creates it on entry and ends it on exit; ``await px.session()`` only
    creates it."""

    def __init__(self, px: AsyncTransport, body: Optional[Dict[str, Any]] = None, session_id: str = "",
                 on_install: Optional[Callable[[str], None]] = None) -> None:
        self._px = px
        self._body = body or {}
        self._on_install = on_install
        self.id = session_id

    def __await__(self):  # type: ignore[no-untyped-def]
        return self._create().__await__()

    async def _create(self) -> "AsyncSession":
        if not self.id:
            self.id = await self._px._create_session(self._body, self._on_install)
        return self

    async def __aenter__(self) -> "AsyncSession":
        return await self._create()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def execute(self, code: str, *, eval_last_expr: bool = True,
                      timeout_seconds: Optional[int] = None) -> CellResult:
        """Run a cell. A Python exception is a result (``exit_code == 1``)."""
        resp = await self._px._request("POST", session_path(self.id) + "/execute",
                                       json=cell_body(code, eval_last_expr, timeout_seconds))
        return CellResult.from_dict(resp.json())

    async def info(self) -> Dict[str, Any]:
        return (await self._px._request("GET", session_path(self.id))).json()

    async def snapshot(self) -> SnapshotSaved:
        """See Session.snapshot."""
        return SnapshotSaved.from_dict((await self._px._request("POST", session_path(self.id) + "/snapshot")).json())

    async def fork(self) -> "AsyncSession":
        """See Session.fork."""
        resp = await self._px._request("POST", session_path(self.id) + "/fork")
        return AsyncSession(self._px, session_id=resp.json()["session_id"])

    async def share_port(self, port: int) -> PortShare:
        """See Session.share_port."""
        resp = await self._px._request("POST", port_path(session_path(self.id), port))
        return PortShare.from_dict(resp.json(), self._px.base_url)

    async def revoke_port(self, port: int) -> int:
        """See Session.revoke_port."""
        return int((await self._px._request("DELETE", port_path(session_path(self.id), port))).json()["revoked"])

    async def interrupt(self) -> None:
        await self._px._request("POST", session_path(self.id) + "/interrupt")

    async def restart(self) -> Dict[str, Any]:
        return (await self._px._request("POST", session_path(self.id) + "/restart")).json()

    async def upload(self, path: str, data: bytes) -> None:
        await self._px._request("PUT", file_path(self.id, path), content=data)

    async def download(self, path: str) -> bytes:
        return (await self._px._request("GET", file_path(self.id, path))).content

    async def files(self) -> List[Dict[str, Any]]:
        return (await self._px._request("GET", session_path(self.id) + "/files")).json()["files"]

    async def close(self) -> None:
        await self._px._request("DELETE", session_path(self.id))
