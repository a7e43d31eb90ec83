"""Typed results of the pyexec API."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional


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
    created_at: Optional[datetime] = None
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

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
            created_at=parse_time(data.get("created_at")),
            started_at=parse_time(data.get("started_at")),
            finished_at=parse_time(data.get("finished_at")),
            raw=dict(data),
        )


class EventType(str, enum.Enum):
    """Kinds of live events."""

    STDOUT = "stdout"
    STDERR = "stderr"
    STATUS = "status"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Event:
    """One live event of an execution; ``seq`` starts at 1 with no gaps.

    For ``stdout``/``stderr`` events ``data`` is a chunk of output; for
    ``status`` events it is the new status.
    """

    seq: int
    type: str
    data: str
    time: Optional[datetime] = None

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
