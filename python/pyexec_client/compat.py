"""PythonExecutorClient: the python-executor client's interface on top of
PyExec, so that code written for that client keeps working.

Differences from the old client, all deliberate:

* Errors are this package's typed exceptions (``NotFoundError`` for an
  unknown ID, ...) carrying the server's message, not ``requests.HTTPError``.
* An ``ExecutionConfig`` field left at None means the server's default;
  the network stays off unless ``network_disabled=False`` is given.
* ``env_vars`` and ``script_args`` are accepted as keyword arguments too.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from . import _common as c
from .client import PyExec
from .tar import detect_entrypoint, tar_from_project, tar_names
from .types import ExecutionResult, ExecutionStatus

__all__ = ["PythonExecutorClient", "Metadata", "ExecutionConfig", "ExecutionResult", "ExecutionStatus"]


@dataclass
class ExecutionConfig:
    """Resource limits of an execution; None means the server's default."""

    timeout_seconds: Optional[int] = None
    network_disabled: bool = True
    memory_mb: Optional[int] = None
    disk_mb: Optional[int] = None
    cpu_shares: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        """The ``config`` JSON object."""
        d: Dict[str, Any] = {"network_disabled": self.network_disabled}
        for key in ("timeout_seconds", "memory_mb", "disk_mb", "cpu_shares"):
            value = getattr(self, key)
            if value is not None:
                d[key] = value
        return d


@dataclass
class Metadata:
    """How to run an uploaded project (the ``metadata`` part)."""

    entrypoint: str
    docker_image: Optional[str] = None
    requirements_txt: Optional[str] = None
    pre_commands: Optional[List[str]] = None
    stdin: Optional[str] = None
    config: Optional[ExecutionConfig] = None
    env_vars: Optional[List[str]] = None
    script_args: Optional[List[str]] = None

    def to_dict(self) -> Dict[str, Any]:
        """The metadata JSON object, without unset fields."""
        d: Dict[str, Any] = {"entrypoint": self.entrypoint}
        for key in ("docker_image", "requirements_txt", "pre_commands", "stdin", "env_vars", "script_args"):
            value = getattr(self, key)
            if value:
                d[key] = value
        if self.config is not None:
            d["config"] = self.config.to_dict()
        return d


_CONFIG_KEYS = ("timeout_seconds", "network_disabled", "memory_mb", "disk_mb", "cpu_shares")
_META_KEYS = ("docker_image", "requirements_txt", "pre_commands", "stdin", "env_vars", "script_args")


class PythonExecutorClient:
    """The python-executor client interface.

    >>> client = PythonExecutorClient("http://localhost:8080")
    >>> client.execute_sync(files={"main.py": "print('Hello!')"}, entrypoint="main.py").exit_code
    0
    """

    def __init__(self, base_url: str, timeout: int = 300) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._px = PyExec(self.base_url, timeout=timeout)

    def close(self) -> None:
        """Close the connections."""
        self._px.close()

    def _prepare(self, files: Union[None, Dict[str, str], Path, str], tar_data: Optional[bytes],
                 metadata: Optional[Metadata], kwargs: Dict[str, Any]) -> Dict[str, Any]:
        if tar_data is None:
            if files is None:
                raise ValueError("Either files or tar_data must be provided")
            tar_data = tar_from_project(files)
        if metadata is None:
            unknown = set(kwargs) - set(_CONFIG_KEYS) - set(_META_KEYS) - {"entrypoint"}
            if unknown:
                raise TypeError(f"unexpected keyword arguments: {', '.join(sorted(unknown))}")
            cfg = {k: kwargs[k] for k in _CONFIG_KEYS if k in kwargs}
            metadata = Metadata(
                entrypoint=kwargs.get("entrypoint") or detect_entrypoint(tar_names(tar_data)),
                config=ExecutionConfig(**cfg) if cfg else None,
                **{k: kwargs[k] for k in _META_KEYS if k in kwargs},
            )
        return {
            "tar": ("code.tar", tar_data, "application/x-tar"),
            "metadata": (None, json.dumps(metadata.to_dict()), "application/json"),
        }

    def execute_sync(self, files: Union[None, Dict[str, str], Path, str] = None, tar_data: Optional[bytes] = None,
                     metadata: Optional[Metadata] = None, **kwargs: Any) -> ExecutionResult:
        """Run a project and wait for its result. ``files`` is a dict of
        file name to content, or a path to a file or directory; kwargs are
        Metadata and ExecutionConfig fields."""
        parts = self._prepare(files, tar_data, metadata, kwargs)
        return ExecutionResult.from_dict(self._px._request("POST", "/api/v1/exec/sync", files=parts).json())

    def execute_async(self, files: Union[None, Dict[str, str], Path, str] = None, tar_data: Optional[bytes] = None,
                      metadata: Optional[Metadata] = None, **kwargs: Any) -> str:
        """Queue a project (as execute_sync) and return its execution ID."""
        parts = self._prepare(files, tar_data, metadata, kwargs)
        return self._px._request("POST", "/api/v1/exec/async", files=parts).json()["execution_id"]

    def get_execution(self, execution_id: str) -> ExecutionResult:
        """The current status and output of an execution."""
        return self._px.get(execution_id)

    def kill(self, execution_id: str) -> None:
        """Kill a running execution."""
        self._px.kill(execution_id)

    def wait_for_completion(self, execution_id: str, poll_interval: float = 2.0,
                            max_wait: Optional[float] = None) -> ExecutionResult:
        """Poll every ``poll_interval`` seconds until the execution ends;
        raise TimeoutError after ``max_wait`` seconds (None: no limit)."""
        start = time.monotonic()
        while True:
            result = self.get_execution(execution_id)
            if result.status.final:
                return result
            if max_wait is not None and time.monotonic() - start > max_wait:
                raise TimeoutError(f"Execution did not complete within {max_wait}s")
            time.sleep(poll_interval)

    def eval(self, code: str, *, files: Optional[List[Dict[str, str]]] = None, entrypoint: Optional[str] = None,
             stdin: Optional[str] = None, python_version: Optional[str] = None,
             timeout_seconds: Optional[int] = None, eval_last_expr: bool = True) -> ExecutionResult:
        """Run code REPL-style: the repr of a final expression comes back in
        ``result``. ``files`` (``[{"name", "content"}]``) wins over code."""
        body = c.eval_body(None if files is not None else code, files, entrypoint, stdin, python_version,
                           {"timeout_seconds": timeout_seconds} if timeout_seconds is not None else None,
                           eval_last_expr, None)
        body["eval_last_expr"] = eval_last_expr
        return ExecutionResult.from_dict(self._px._request("POST", "/api/v1/eval", json=body).json())
