"""Snapshots of sessions: a session's variables, imports and workspace
files saved by the server, restored later into a new session.

>>> with PyExec() as px, px.session() as s:
...     _ = s.execute("x = 42")
...     snap = s.snapshot()
>>> with px.session(from_snapshot=snap.snapshot_id) as restored:
...     restored.execute("x").result
'42'

A snapshot belongs to the API key whose session it was made of; another
key is told it does not exist (NotFoundError).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Awaitable, Callable, List, Mapping, Optional, Tuple
from urllib.parse import quote

import httpx

from .types import parse_time

#: A session's states, as ``Session.info()["state"]`` says them.
IDLE, BUSY, HIBERNATED = "idle", "busy", "hibernated"


@dataclass(frozen=True)
class Skipped:
    """A variable a snapshot left out, or a restore could not load, and why
    (a thread, an open socket, a module the environment lacks)."""

    name: str
    reason: str


def skipped_list(data: Any) -> Tuple[Skipped, ...]:
    return tuple(Skipped(str(s.get("name", "")), str(s.get("reason", ""))) for s in data or ())


@dataclass(frozen=True)
class SnapshotSaved:
    """The answer of ``Session.snapshot()``: the snapshot's id (pass it as
    ``from_snapshot`` to ``session()``), its stored size, the session's
    cells when it was saved, the variables saved and those left out."""

    snapshot_id: str
    bytes: int
    execution_count: int = 0
    saved: Tuple[str, ...] = ()
    skipped: Tuple[Skipped, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SnapshotSaved":
        return cls(snapshot_id=data["snapshot_id"], bytes=int(data.get("bytes") or 0),
                   execution_count=int(data.get("execution_count") or 0), saved=tuple(data.get("saved") or ()),
                   skipped=skipped_list(data.get("skipped")))


@dataclass(frozen=True)
class SnapshotInfo:
    """A stored snapshot, as ``list_snapshots()`` describes it."""

    snapshot_id: str
    session_id: str
    bytes: int
    created_at: Optional[datetime] = None
    python_version: str = ""
    execution_count: int = 0
    skipped: Tuple[Skipped, ...] = field(default=())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SnapshotInfo":
        return cls(snapshot_id=data["snapshot_id"], session_id=data.get("session_id") or "",
                   bytes=int(data.get("bytes") or 0), created_at=parse_time(data.get("created_at")),
                   python_version=data.get("python_version") or "",
                   execution_count=int(data.get("execution_count") or 0), skipped=skipped_list(data.get("skipped")))


def snapshot_path(snapshot_id: str) -> str:
    return "/api/v1/snapshots/" + quote(snapshot_id, safe="")


class SnapshotsMixin:
    """list_snapshots and delete_snapshot for PyExec."""

    _request: Callable[..., httpx.Response]

    def list_snapshots(self) -> List[SnapshotInfo]:
        """Your snapshots, oldest first."""
        return [SnapshotInfo.from_dict(s) for s in self._request("GET", "/api/v1/snapshots").json()["snapshots"]]

    def delete_snapshot(self, snapshot_id: str) -> None:
        """Delete a snapshot; an unknown one (or another key's) raises
        NotFoundError. Sessions restored from it are not affected."""
        self._request("DELETE", snapshot_path(snapshot_id))


class AsyncSnapshotsMixin:
    """list_snapshots and delete_snapshot for AsyncPyExec."""

    _request: Callable[..., Awaitable[httpx.Response]]

    async def list_snapshots(self) -> List[SnapshotInfo]:
        """See PyExec.list_snapshots."""
        return [SnapshotInfo.from_dict(s) for s in (await self._request("GET", "/api/v1/snapshots")).json()["snapshots"]]

    async def delete_snapshot(self, snapshot_id: str) -> None:
        """See PyExec.delete_snapshot."""
        await self._request("DELETE", snapshot_path(snapshot_id))
