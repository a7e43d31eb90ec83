"""pyexec-client: Python client of pyexec, a service that runs untrusted
Python in a Linux jail (and of the python-executor API it speaks).

* ``PyExec`` / ``AsyncPyExec``: eval, projects, async submit/wait/kill,
  live events, listing, lint, execution files, tool definitions, stateful
  sessions (``px.session()``), their snapshots and forks; rich outputs (plots, tables) on
  ``ExecutionResult.outputs``.
* ``PythonExecutorClient``: the old python-executor client's interface.
* ``pyexec_client.tools``: run a model's tool calls (OpenAI, Anthropic).
"""

from .aio import AsyncPyExec
from .client import PyExec
from .compat import ExecutionConfig, Metadata, PythonExecutorClient
from .errors import (
    APIError,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PayloadTooLargeError,
    PyExecError,
    RateLimitError,
    ServerError,
    ServiceUnavailableError,
    StreamEndedError,
    TransportError,
    WaitTimeoutError,
)
from .previews import PortShare
from .sessions import AsyncSession, CellResult, RestoredFrom, Session
from .snapshots import Skipped, SnapshotInfo, SnapshotSaved
from .tar import detect_entrypoint, tar_from_dict, tar_from_directory, tar_from_project
from .types import Diagnostic, Event, EventType, ExecutionList, ExecutionResult, ExecutionStatus, FileInfo, Output

__version__ = "0.1.0"

__all__ = [
    "PyExec", "AsyncPyExec", "Session", "AsyncSession", "CellResult", "RestoredFrom", "SnapshotSaved", "SnapshotInfo", "Skipped", "PortShare", "PythonExecutorClient", "Metadata", "ExecutionConfig",
    "ExecutionResult", "ExecutionStatus", "ExecutionList", "Event", "EventType", "Output", "FileInfo", "Diagnostic",
    "PyExecError", "APIError", "BadRequestError", "AuthenticationError", "NotFoundError", "PayloadTooLargeError",
    "RateLimitError", "ServerError", "ServiceUnavailableError", "TransportError", "StreamEndedError",
    "WaitTimeoutError", "tar_from_dict", "tar_from_directory", "tar_from_project", "detect_entrypoint",
]
