"""The synchronous pyexec client."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import httpx

from . import _common as c
from ._files import FilesMixin
from ._workspaces import WorkspacesMixin
from ._transport import POLL_INTERVAL
from .errors import StreamEndedError, TransportError, WaitTimeoutError
from .sessions import CreateStreamDecoder, Requirements, Session, create_body
from .snapshots import SnapshotsMixin
from .tar import Project
from .types import Event, ExecutionList, ExecutionResult, ExecutionStatus


class PyExec(FilesMixin, WorkspacesMixin, SnapshotsMixin):
    """Client of a pyexec (or python-executor) server.

    >>> with PyExec("http://localhost:8080") as px:
    ...     px.eval("6 * 7").result
    '42'

    Args:
        base_url: the server; default $PYEXEC_SERVER, else http://localhost:8080.
        api_key: sent as a bearer token; default $PYEXEC_API_KEY.
        timeout: seconds each request may take (runs included); None for no limit.
        http_client: an httpx.Client to use (its base URL and headers are left alone).
    """

    def __init__(self, base_url: Optional[str] = None, *, api_key: Optional[str] = None,
                 timeout: Optional[float] = 300.0, http_client: Optional[httpx.Client] = None) -> None:
        self.base_url = c.base_url(base_url)
        self._headers = c.headers(api_key)
        self._timeout = timeout
        self._own = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout)

    def close(self) -> None:
        """Close the connections (unless the httpx client was given)."""
        if self._own:
            self._http.close()

    def __enter__(self) -> "PyExec":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            resp = self._http.request(method, self.base_url + path, headers=self._headers, **kw)
        except httpx.TransportError as e:
            raise TransportError(f"{method} {path}: {e}") from e
        if resp.status_code >= 400:
            raise c.api_error(resp.status_code, resp.content, resp.headers.get("Retry-After"), resp.reason_phrase)
        return resp

    # --- service ---------------------------------------------------------

    def health(self) -> Dict[str, Any]:
        """GET /health: ``{"status": "ok", ...}``."""
        return self._request("GET", "/health").json()

    def tools(self, format: str = "openai", *, strict: bool = False) -> List[Dict[str, Any]]:
        """Tool definitions for model function calling: ``"openai"`` (Chat
        Completions), ``"openai-responses"`` (Responses API) or
        ``"anthropic"`` (Messages API). ``strict`` gives OpenAI strict-mode
        schemas (every argument required, the optional ones nullable). See
        pyexec_client.tools to execute the calls."""
        params = {"format": format}
        if strict:
            params["strict"] = "true"
        return self._request("GET", "/api/v1/tools", params=params).json()["tools"]

    # --- running code ----------------------------------------------------

    def eval(self, code: Optional[str] = None, *, files: Optional[c.EvalFiles] = None,
             entrypoint: Optional[str] = None, stdin: Optional[str] = None, python_version: Optional[str] = None,
             timeout_seconds: Optional[int] = None, memory_mb: Optional[int] = None, disk_mb: Optional[int] = None,
             cpu_shares: Optional[int] = None, network: Optional[bool] = None,
             secrets: Optional[Sequence[str]] = None, eval_last_expr: bool = True,
             requirements: Optional[str] = None, workspace: Optional[str] = None,
             workspace_mode: Optional[str] = None) -> ExecutionResult:
        """Run code (as main.py) or files sent as JSON and wait for the result.

        The repr of a final expression comes back in ``result`` (as with the
        CLI's ``pyexec eval``); ``eval_last_expr=False`` runs the code as a
        plain script. A Python exception is a result (``exit_code != 0``), not
        an exception of this client.
        """
        body = c.eval_body(code, files, entrypoint, stdin, python_version,
                           c.config(timeout_seconds, memory_mb, disk_mb, cpu_shares, network, secrets, workspace,
                                    workspace_mode),
                           eval_last_expr, requirements)
        return ExecutionResult.from_dict(self._request("POST", "/api/v1/eval", json=body).json())

    def run(self, project: Project, *, entrypoint: Optional[str] = None, python_version: Optional[str] = None,
            stdin: Optional[str] = None, env: Union[None, Mapping[str, str], Sequence[str]] = None,
            args: Optional[Sequence[str]] = None, requirements: Optional[str] = None,
            timeout_seconds: Optional[int] = None, memory_mb: Optional[int] = None, disk_mb: Optional[int] = None,
            cpu_shares: Optional[int] = None, network: Optional[bool] = None,
            secrets: Optional[Sequence[str]] = None, workspace: Optional[str] = None,
            workspace_mode: Optional[str] = None) -> ExecutionResult:
        """Upload a project and run it, waiting for the result.

        ``project`` is a mapping of paths to contents, a directory, a file or
        tar bytes; the entrypoint defaults to main.py, __main__.py or the
        first .py file.
        """
        parts = c.upload(project, entrypoint, python_version, stdin, env, args, requirements,
                         c.config(timeout_seconds, memory_mb, disk_mb, cpu_shares, network, secrets, workspace,
                                  workspace_mode))
        return ExecutionResult.from_dict(self._request("POST", "/api/v1/exec/sync", files=parts).json())

    def submit(self, project: Project, *, entrypoint: Optional[str] = None, python_version: Optional[str] = None,
               stdin: Optional[str] = None, env: Union[None, Mapping[str, str], Sequence[str]] = None,
               args: Optional[Sequence[str]] = None, requirements: Optional[str] = None,
               timeout_seconds: Optional[int] = None, memory_mb: Optional[int] = None, disk_mb: Optional[int] = None,
               cpu_shares: Optional[int] = None, network: Optional[bool] = None,
               secrets: Optional[Sequence[str]] = None, workspace: Optional[str] = None,
               workspace_mode: Optional[str] = None) -> str:
        """Queue a project (as for run) and return its execution ID at once."""
        parts = c.upload(project, entrypoint, python_version, stdin, env, args, requirements,
                         c.config(timeout_seconds, memory_mb, disk_mb, cpu_shares, network, secrets, workspace,
                                  workspace_mode))
        return self._request("POST", "/api/v1/exec/async", files=parts).json()["execution_id"]

    # --- sessions --------------------------------------------------------

    def session(self, *, python_version: Optional[str] = None, requirements: Requirements = None,
                env: Optional[Mapping[str, str]] = None, memory_mb: Optional[int] = None,
                disk_mb: Optional[int] = None, cpu_shares: Optional[int] = None, network: Any = None,
                idle_timeout_seconds: Optional[int] = None, max_lifetime_seconds: Optional[int] = None,
                on_install: Optional[Callable[[str], None]] = None, workspace: Optional[str] = None,
                workspace_mode: Optional[str] = None,
                from_snapshot: Optional[str] = None, secrets: Optional[Sequence[str]] = None) -> "Session":
        """Create a stateful session (see pyexec_client.sessions); use it
        with ``with`` to end it on exit.

        The session has the server's base environment (numpy, pandas,
        matplotlib... by default); ``requirements`` (requirements.txt text
        or a list of requirements) are installed over it, and
        ``on_install`` receives the installer's lines while that happens.
        Requirements that cannot be installed raise a BadRequestError whose
        message starts with ``install_error:``. ``from_snapshot`` restores
        a snapshot of yours (``Session.snapshot()``) into the new session:
        its variables and files, and its configuration for what is left
        out here. ``network`` (True, or a list of destinations) and
        ``secrets`` (operator secrets by name) are as for ``run``: the
        session gets an egress of its own for its whole life
        (docs/network.md)."""
        body = create_body(python_version, requirements, env, memory_mb, disk_mb, cpu_shares, network,
                           idle_timeout_seconds, max_lifetime_seconds, workspace, workspace_mode,
                           from_snapshot, secrets)
        return Session(self, self._create_session(body, on_install))

    def _create_session(self, body: Dict[str, Any], on_install: Optional[Callable[[str], None]]) -> str:
        """POST /api/v1/sessions, streaming install progress to on_install."""
        if on_install is None:
            return self._request("POST", "/api/v1/sessions", json=body).json()["session_id"]
        hdrs = dict(self._headers, Accept="text/event-stream")
        try:
            with self._http.stream("POST", self.base_url + "/api/v1/sessions", headers=hdrs, json=body,
                                   timeout=httpx.Timeout(self._timeout, read=None)) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise c.api_error(resp.status_code, resp.content, resp.headers.get("Retry-After"),
                                      resp.reason_phrase)
                if not resp.headers.get("Content-Type", "").startswith("text/event-stream"):
                    resp.read()
                    return resp.json()["session_id"]
                dec = CreateStreamDecoder(on_install)
                for line in resp.iter_lines():
                    session_id = dec.feed(line)
                    if session_id:
                        return session_id
        except httpx.TransportError as e:
            raise TransportError(f"POST /api/v1/sessions: {e}") from e
        raise StreamEndedError("the stream ended before the session was created")

    def list_sessions(self) -> List[Dict[str, Any]]:
        """Your live sessions, oldest first."""
        return self._request("GET", "/api/v1/sessions").json()["sessions"]

    # --- executions ------------------------------------------------------

    def get(self, execution_id: str) -> ExecutionResult:
        """The current state of an execution, with its output so far."""
        return ExecutionResult.from_dict(self._request("GET", f"/api/v1/executions/{execution_id}").json())

    def kill(self, execution_id: str) -> ExecutionStatus:
        """Kill an execution; returns ``killed``, or the final status it
        already had."""
        return ExecutionStatus(self._request("DELETE", f"/api/v1/executions/{execution_id}").json()["status"])

    def list_executions(self, *, status: Optional[Union[str, ExecutionStatus]] = None, limit: Optional[int] = None,
                        cursor: Optional[str] = None) -> ExecutionList:
        """One page of executions, most recent first."""
        params = {k: str(v) for k, v in (("status", status), ("limit", limit), ("cursor", cursor)) if v is not None}
        return ExecutionList.from_dict(self._request("GET", "/api/v1/executions", params=params).json())

    def events(self, execution_id: str, *, after: int = 0, timeout: Optional[float] = None) -> Iterator[Event]:
        """Iterate over an execution's live events: output chunks as they are
        written and status changes, replayed from the start (or after seq
        ``after``). Ends after the final status event; raises
        StreamEndedError if the stream ends before it. ``timeout`` bounds the
        wait for each event (the server sends heartbeats every 15 s)."""
        path = f"/api/v1/executions/{execution_id}/events"
        params = {"after": str(after)} if after else None
        hdrs = dict(self._headers, Accept="text/event-stream")
        try:
            with self._http.stream("GET", self.base_url + path, headers=hdrs, params=params,
                                   timeout=httpx.Timeout(self._timeout, read=timeout)) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise c.api_error(resp.status_code, resp.content, resp.headers.get("Retry-After"),
                                      resp.reason_phrase)
                dec = c.SSEDecoder()
                for line in resp.iter_lines():
                    ev = dec.feed(line)
                    if ev is None:
                        continue
                    yield ev
                    if ev.final:
                        return
        except httpx.TimeoutException as e:
            raise WaitTimeoutError(f"no event from {execution_id} within {timeout}s") from e
        except httpx.TransportError as e:
            raise TransportError(f"following {execution_id}: {e}") from e
        raise StreamEndedError(f"event stream of {execution_id} ended before its final status")

    def wait(self, execution_id: str, *, timeout: Optional[float] = None) -> ExecutionResult:
        """Wait until an execution ends and return its final result.

        Follows the event stream (no polling delay); polls if the stream
        breaks off. Raises WaitTimeoutError after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            for ev in self.events(execution_id, timeout=timeout):
                if deadline is not None and time.monotonic() > deadline:
                    raise WaitTimeoutError(f"{execution_id} did not finish within {timeout}s")
        except (StreamEndedError, TransportError):
            pass  # the record below is the authority; poll it
        while True:
            res = self.get(execution_id)
            if res.done:
                return res
            if deadline is not None and time.monotonic() > deadline:
                raise WaitTimeoutError(f"{execution_id} did not finish within {timeout}s")
            time.sleep(POLL_INTERVAL)
