"""What the sync and async clients share: building requests, reading
answers and decoding event streams. No I/O happens here."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import APIError, error_for_status
from .tar import Project, detect_entrypoint, tar_from_project, tar_names
from .types import Event

DEFAULT_SERVER = "http://localhost:8080"
USER_AGENT = "pyexec-client-python"

#: Files of an eval request: a mapping of path to text, or a list of
#: ``{"name": ..., "content": ...}`` as the API takes them.
EvalFiles = Union[Mapping[str, str], Sequence[Mapping[str, str]]]


def base_url(url: Optional[str]) -> str:
    """The server URL: the argument, else $PYEXEC_SERVER, else localhost:8080."""
    return (url or os.environ.get("PYEXEC_SERVER") or DEFAULT_SERVER).rstrip("/")


def headers(api_key: Optional[str]) -> Dict[str, str]:
    """Headers of every request; the key defaults to $PYEXEC_API_KEY."""
    h = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    key = api_key if api_key is not None else os.environ.get("PYEXEC_API_KEY")
    if key:
        h["Authorization"] = f"Bearer {key}"
    return h


def config(timeout_seconds: Optional[int], memory_mb: Optional[int], disk_mb: Optional[int],
           cpu_shares: Optional[int], network: Any,
           secrets: Optional[Sequence[str]] = None, workspace: Optional[str] = None,
           workspace_mode: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The ``config`` object of a request, or None when nothing is set.
    The network choice is sent explicitly whenever it is given. ``network``
    may also be a list of destinations (``["pypi.org:443", "*.github.com"]``):
    network narrowed to them, within the operator's list. ``secrets`` names
    operator secrets (docs/network.md); they ask for network unless
    ``network`` says otherwise. ``workspace`` names a workspace of the key
    mounted at /workspace (``workspace_mode`` "ro": read-only;
    docs/workspaces.md)."""
    c: Dict[str, Any] = {}
    for key, value in (("timeout_seconds", timeout_seconds), ("memory_mb", memory_mb),
                       ("disk_mb", disk_mb), ("cpu_shares", cpu_shares)):
        if value is not None:
            c[key] = value
    if isinstance(network, (list, tuple)):
        c["network_disabled"] = False
        c["network"] = {"allow": [str(r) for r in network]}
    elif network is not None:
        c["network_disabled"] = not network
    if isinstance(secrets, str):
        raise TypeError("secrets must be a list of names, not a string")
    if secrets:
        c["secrets"] = [str(s) for s in secrets]
        c.setdefault("network_disabled", False)
    if workspace_mode is not None and workspace is None:
        raise ValueError("workspace_mode needs a workspace")
    if workspace is not None:
        c["workspace"] = workspace
    if workspace_mode is not None:
        c["workspace_mode"] = workspace_mode
    return c or None


def eval_body(code: Optional[str], files: Optional[EvalFiles], entrypoint: Optional[str], stdin: Optional[str],
              python_version: Optional[str], cfg: Optional[Dict[str, Any]], eval_last_expr: bool,
              requirements: Optional[str]) -> Dict[str, Any]:
    """The JSON body of POST /api/v1/eval."""
    body: Dict[str, Any] = {}
    if files is not None:
        if isinstance(files, Mapping):
            body["files"] = [{"name": k, "content": v} for k, v in files.items()]
        else:
            body["files"] = [dict(f) for f in files]
    if code is not None:
        body["code"] = code
    if "code" not in body and "files" not in body:
        raise ValueError("eval needs code or files")
    for key, value in (("entrypoint", entrypoint), ("stdin", stdin), ("python_version", python_version),
                       ("config", cfg), ("requirements_txt", requirements)):
        if value is not None:
            body[key] = value
    if eval_last_expr:
        body["eval_last_expr"] = True
    return body


def env_list(env: Union[None, Mapping[str, str], Sequence[str]]) -> Optional[List[str]]:
    """Environment variables as the API's ``KEY=value`` strings."""
    if env is None:
        return None
    if isinstance(env, Mapping):
        return [f"{k}={v}" for k, v in env.items()]
    return list(env)


def upload(project: Project, entrypoint: Optional[str], python_version: Optional[str], stdin: Optional[str],
           env: Union[None, Mapping[str, str], Sequence[str]], args: Optional[Sequence[str]],
           requirements: Optional[str], cfg: Optional[Dict[str, Any]],
           extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Tuple[Optional[str], Union[bytes, str], str]]:
    """The multipart parts of POST /api/v1/exec/sync|async: the project's
    tar and the metadata JSON. The entrypoint is detected when not given."""
    tar_data = tar_from_project(project)
    meta: Dict[str, Any] = {"entrypoint": entrypoint or detect_entrypoint(tar_names(tar_data))}
    if python_version:
        meta["docker_image"] = f"python:{python_version}"
    for key, value in (("stdin", stdin), ("env_vars", env_list(env)), ("script_args", list(args) if args else None),
                       ("requirements_txt", requirements), ("config", cfg)):
        if value is not None:
            meta[key] = value
    if extra:
        meta.update({k: v for k, v in extra.items() if v is not None})
    return {
        "tar": ("code.tar", tar_data, "application/x-tar"),
        "metadata": (None, json.dumps(meta), "application/json"),
    }


def retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a Retry-After header (delta-seconds or HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def api_error(status_code: int, body: bytes, retry_after_header: Optional[str], reason: str) -> APIError:
    """The exception for an error answer, carrying the server's message."""
    message = ""
    try:
        data = json.loads(body)
        if isinstance(data, dict):
            message = str(data.get("error") or data.get("detail") or data.get("title") or "")
    except ValueError:
        text = body.decode("utf-8", "replace").strip()
        if text and not text.startswith("<"):
            message = text[:1000]
    return error_for_status(status_code, message or reason or f"HTTP {status_code}", retry_after(retry_after_header))


@dataclass
class SSEDecoder:
    """Decodes Server-Sent Events line by line into Events."""

    _id: str = ""
    _event: str = ""
    _data: Optional[List[str]] = None

    def feed(self, line: str) -> Optional[Event]:
        """Take one line (without its newline); return an Event when a
        blank line completes one."""
        if line == "":
            if self._data is None:
                self._event = ""
                return None
            payload = "\n".join(self._data)
            ev_id, ev_type = self._id, self._event
            self._data, self._event = None, ""
            data = json.loads(payload)
            if isinstance(data, dict):
                data.setdefault("type", ev_type)
                if not data.get("seq") and ev_id.isdigit():
                    data["seq"] = int(ev_id)
                return Event.from_dict(data)
            return Event(seq=int(ev_id) if ev_id.isdigit() else 0, type=ev_type, data=str(data))
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data = (self._data or []) + [value]
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        return None
