"""Typed results of the pyexec API."""

from __future__ import annotations

import base64
import binascii
import enum
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Tuple


class ExecutionStatus(str, enum.Enum):
    """The state of an execution: pending → running → completed | failed | killed.

    A Python exception still ends ``completed``, with a non-zero exit code;
    ``failed`` means the run could not finish (timeout, limit, service failure).
    """

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    KILLED = "killed"

    def __str__(self) -> str:
        return self.value

    @property
    def final(self) -> bool:
        """True for completed, failed and killed."""
        return self in (ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.KILLED)


_FRACTION = re.compile(r"\.(\d+)")


def parse_time(value: Optional[str]) -> Optional[datetime]:
    """Parse an RFC 3339 time on every supported Python version: before
    3.11, fromisoformat takes neither "Z" nor fractions other than 3 or 6
    digits (Go trims trailing zeros), so both are normalised first."""
    if not value:
        return None
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    value = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], value, count=1)
    return datetime.fromisoformat(value)


@dataclass(frozen=True)
class Output:
    """One rich output, a Jupyter-style MIME bundle: a ``display()`` call, a
    matplotlib figure (``type == "display"``) or the last expression
    (``type == "result"``). ``data`` maps a MIME type to its content: text
    for text types, base64 for ``image/png`` and ``image/jpeg``, any JSON
    value for ``application/json``."""

    type: str
    data: Dict[str, Any] = field(default_factory=dict)
    metadata: Optional[Dict[str, Any]] = None

    def text(self, mime: str = "text/plain") -> Optional[str]:
        """The string content of ``mime``, or None when the bundle lacks it."""
        value = self.data.get(mime)
        return value if isinstance(value, str) else None

    @property
    def plain(self) -> Optional[str]:
        """The ``text/plain`` form (the repr)."""
        return self.text("text/plain")

    @property
    def html(self) -> Optional[str]:
        """The ``text/html`` form, e.g. a DataFrame's table."""
        return self.text("text/html")

    @property
    def json(self) -> Any:
        """The ``application/json`` form (for a DataFrame: columns, records,
        total_rows, truncated), or None."""
        return self.data.get("application/json")

    @property
    def png(self) -> Optional[bytes]:
        """The decoded PNG bytes, or None."""
        return self._decoded("image/png")

    def image(self) -> Optional[Tuple[str, bytes]]:
        """The best image of the bundle as (MIME type, bytes): PNG, JPEG,
        else SVG (its text, encoded); None when there is none."""
        for mime in ("image/png", "image/jpeg"):
            data = self._decoded(mime)
            if data is not None:
                return mime, data
        svg = self.text("image/svg+xml")
        return ("image/svg+xml", svg.encode()) if svg is not None else None

    def _decoded(self, mime: str) -> Optional[bytes]:
        value = self.text(mime)
        if value is None:
            return None
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Output":
        """Build an output from its JSON."""
        return cls(type=str(data.get("type", "")), data=dict(data.get("data") or {}), metadata=data.get("metadata"))


@dataclass(frozen=True)
class FileInfo:
    """A file an execution wrote or changed; download it with
    ``download_file``. ``content`` holds a small image's bytes when the
    server inlined them in the result."""

    path: str
    size: int
    sha256: str = ""
    mime: str = ""
    content: Optional[bytes] = field(default=None, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FileInfo":
        """Build a file entry from its JSON."""
        content = data.get("content")
        return cls(path=data["path"], size=int(data.get("size") or 0), sha256=data.get("sha256") or "",
                   mime=data.get("mime") or "", content=base64.b64decode(content) if content else None)


@dataclass(frozen=True)
class Diagnostic:
    """One problem ruff found. ``code`` is empty for a syntax error; ``fix``
    is ruff's fix object when it has one."""

    code: str
    message: str
    filename: str
    line: int
    column: int
    end_line: int
    end_column: int
    fix: Optional[Dict[str, Any]] = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Diagnostic":
        """Build a diagnostic from the API's JSON."""
        loc, end = data.get("location") or {}, data.get("end_location") or {}
        return cls(code=data.get("code") or "", message=data.get("message") or "",
                   filename=data.get("filename") or "main.py", line=int(loc.get("line", 0)),
                   column=int(loc.get("column", 0)), end_line=int(end.get("line", 0)),
                   end_column=int(end.get("column", 0)), fix=data.get("fix"))


@dataclass(frozen=True)
class ExecutionResult:
    """The state and outcome of one execution.

    ``raw`` holds the whole JSON record, including fields newer servers add.
    """

    execution_id: str
    status: ExecutionStatus
    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    error: Optional[str] = None
    error_type: Optional[str] = None
    error_line: Optional[int] = None
    result: Optional[str] = None
    reason: Optional[str] = None
    timed_out: bool = False
    duration_ms: Optional[int] = None
    cpu_time_ms: Optional[int] = None
    peak_memory_bytes: Optional[int] = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    python_version: Optional[str] = None
    #: The fleet node that runs or ran it (its --node-name); None until it starts.
    node: Optional[str] = None
    created_at: Optional[datetime] = None
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    #: Rich outputs in order (plots, display() calls, the last expression).
    outputs: List[Output] = field(default_factory=list, repr=False)
    outputs_truncated: bool = False
    #: The JSON of the script's top-level ``results`` dict, if any.
    results: Any = None
    #: Files the run wrote or changed (see PyExec.download_file).
    files: List[FileInfo] = field(default_factory=list)
    files_omitted: int = 0
    #: ruff's diagnostics, when the request asked for them.
    lint: List[Diagnostic] = field(default_factory=list, repr=False)
    warnings: List[str] = field(default_factory=list)
    #: What became of the run's workspace (``workspace=``): ``name``, ``mode``,
    #: ``version``, ``base``, ``changed``, ``added``, ``modified``,
    #: ``deleted``, ``conflicts``, ``refused``; ``error`` when its changes
    #: were not kept. None for a run without one.
    workspace: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def images(self) -> List[Tuple[str, bytes]]:
        """Every image among the outputs, as (MIME type, bytes), in order."""
        return [img for img in (o.image() for o in self.outputs) if img is not None]

    @property
    def done(self) -> bool:
        """True once the execution reached a final state."""
        return self.status.final

    @property
    def ok(self) -> bool:
        """True when the code ran to its end with exit code 0."""
        return self.status is ExecutionStatus.COMPLETED and self.exit_code == 0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ExecutionResult":
        """Build a result from the API's JSON."""
        return cls(
            execution_id=data["execution_id"],
            status=ExecutionStatus(data["status"]),
            exit_code=data.get("exit_code") or 0,
            stdout=data.get("stdout") or "",
            stderr=data.get("stderr") or "",
            error=data.get("error"),
            error_type=data.get("error_type"),
            error_line=data.get("error_line"),
            result=data.get("result"),
            reason=data.get("reason"),
            timed_out=bool(data.get("timed_out")),
            duration_ms=data.get("duration_ms"),
            cpu_time_ms=data.get("cpu_time_ms"),
            peak_memory_bytes=data.get("peak_memory_bytes"),
            stdout_truncated=bool(data.get("stdout_truncated")),
            stderr_truncated=bool(data.get("stderr_truncated")),
            python_version=data.get("python_version"),
            node=data.get("node"),
            created_at=parse_time(data.get("created_at")),
            started_at=parse_time(data.get("started_at")),
            finished_at=parse_time(data.get("finished_at")),
            outputs=[Output.from_dict(o) for o in data.get("outputs") or []],
            outputs_truncated=bool(data.get("outputs_truncated")),
            results=data.get("results"),
            files=[FileInfo.from_dict(f) for f in data.get("files") or []],
            files_omitted=int(data.get("files_omitted") or 0),
            lint=[Diagnostic.from_dict(d) for d in data.get("lint") or []],
            warnings=list(data.get("warnings") or []),
            workspace=data.get("workspace"),
            raw=dict(data),
        )


class EventType(str, enum.Enum):
    """Kinds of live events."""

    STDOUT = "stdout"
    STDERR = "stderr"
    STATUS = "status"
    INSTALL = "install"
    DISPLAY = "display"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Event:
    """One live event of an execution; ``seq`` starts at 1 with no gaps.

    For ``stdout``/``stderr`` events ``data`` is a chunk of output; for
    ``status`` events it is the new status; for ``install`` events a line
    of installer progress; for ``display`` events the JSON of a rich
    output (see ``output()``).
    """

    seq: int
    type: str
    data: str
    time: Optional[datetime] = None

    def output(self) -> Output:
        """The rich output of a ``display`` event."""
        if self.type != EventType.DISPLAY.value:
            raise ValueError(f"event {self.seq} is {self.type}, not display")
        return Output.from_dict(json.loads(self.data))

    @property
    def final(self) -> bool:
        """True for the status event that ends the stream."""
        return self.type == EventType.STATUS.value and self.data in ("completed", "failed", "killed")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Event":
        """Build an event from its JSON."""
        return cls(seq=int(data.get("seq", 0)), type=str(data.get("type", "")), data=str(data.get("data", "")),
                   time=parse_time(data.get("time")))


@dataclass(frozen=True)
class ExecutionList:
    """One page of executions, most recent first; pass ``next_cursor`` as
    ``cursor`` to get the next page (None on the last page)."""

    executions: List[ExecutionResult]
    next_cursor: Optional[str] = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ExecutionList":
        """Build a page from the API's JSON."""
        return cls(executions=[ExecutionResult.from_dict(e) for e in data.get("executions") or []],
                   next_cursor=data.get("next_cursor") or None)
