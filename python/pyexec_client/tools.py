"""Execute a model's tool calls with pyexec.

The tool definitions come from the server (``PyExec.tools("openai")`` or
``PyExec.tools("anthropic")``, i.e. GET /api/v1/tools): the same tools, with
the same arguments, as pyexec's MCP server. These helpers run one call and
build the message that returns its result to the model::

    tools = px.tools("openai")
    reply = openai.chat.completions.create(model=..., messages=messages, tools=tools)
    for call in reply.choices[0].message.tool_calls or []:
        messages.append(openai_tool_message(px, call))

The text a model reads has the layout of the MCP server's: a status line,
the error if any, then stdout and stderr under ``--- stdout ---`` and
``--- stderr ---`` headers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from .aio import AsyncPyExec
from .client import PyExec
from .errors import APIError
from .sessions import AsyncSession, CellResult, Session
from .types import ExecutionResult, ExecutionStatus

__all__ = [
    "RUN_PYTHON", "ToolOutcome", "render_result", "run_tool", "arun_tool", "openai_tool_message",
    "aopenai_tool_message", "anthropic_tool_result", "aanthropic_tool_result",
]

#: Name of the code-running tool.
RUN_PYTHON = "run_python"
CREATE_SESSION = "create_session"
CLOSE_SESSION = "close_session"
TOOLS = (RUN_PYTHON, CREATE_SESSION, CLOSE_SESSION)

_ENTRYPOINT = "main.py"
_PYTHON_VERSION = re.compile(r"^3\.[0-9]{1,2}$")


@dataclass(frozen=True)
class ToolOutcome:
    """The outcome of one tool call: the text for the model, whether it is
    an error (a Python exception, a timeout, a refused request), and the
    execution's result when code ran."""

    text: str
    is_error: bool
    result: Optional[ExecutionResult] = None


class _BadArguments(ValueError):
    pass


def render_result(r: ExecutionResult) -> str:
    """The text of a finished execution, as the MCP server renders it."""
    out = [f"status: {r.status}, exit code {r.exit_code}" + (f", {r.duration_ms} ms" if r.duration_ms else "")]
    if r.error_type or r.error:
        line = "error: " + (r.error_type or "")
        if r.error_type and r.error:
            line += ": "
        line += r.error or ""
        if r.error_line:
            line += f" (line {r.error_line})"
        out.append(line)
    for name, text, truncated in (("stdout", r.stdout, r.stdout_truncated), ("stderr", r.stderr, r.stderr_truncated)):
        if text:
            out.append(f"--- {name} ---")
            out.append(text[:-1] if text.endswith("\n") else text)
            if truncated:
                out.append(f"[{name} truncated at the server's output limit]")
    if not r.stdout and not r.stderr:
        out.append("(no output)")
    return "\n".join(out) + "\n"


def _failed(r: ExecutionResult) -> bool:
    return r.status is not ExecutionStatus.COMPLETED or r.exit_code != 0


def _arguments(arguments: Union[str, Mapping[str, Any], None]) -> Dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError as e:
            raise _BadArguments(f"arguments are not valid JSON: {e}") from e
    if not isinstance(arguments, Mapping):
        raise _BadArguments("arguments must be a JSON object")
    return dict(arguments)


def _eval_request(args: Mapping[str, Any]) -> Dict[str, Any]:
    """eval() keyword arguments for run_python's arguments."""
    code = args.get("code")
    if not isinstance(code, str):
        raise _BadArguments("code is required and must be a string")
    files: List[Dict[str, str]] = [{"name": _ENTRYPOINT, "content": code}]
    for i, f in enumerate(args.get("files") or []):
        if not isinstance(f, Mapping) or not isinstance(f.get("path"), str) or not isinstance(f.get("content"), str):
            raise _BadArguments(f"files[{i}] must be an object with string path and content")
        if any(x["name"] == f["path"] for x in files):
            raise _BadArguments(f"files[{i}]: {f['path']!r} is given twice (the code argument is {_ENTRYPOINT})")
        files.append({"name": f["path"], "content": f["content"]})
    version = args.get("python_version")
    if version is not None and (not isinstance(version, str) or not _PYTHON_VERSION.match(version)):
        raise _BadArguments(f"python_version {version!r} is not MAJOR.MINOR, e.g. 3.12")
    timeout = args.get("timeout_seconds")
    if timeout is not None and (not isinstance(timeout, int) or timeout < 1):
        raise _BadArguments("timeout_seconds must be a positive integer")
    return {
        "files": files,
        "entrypoint": _ENTRYPOINT,
        "python_version": version,
        "timeout_seconds": timeout,
        "network": bool(args.get("network")),
        "stdin": args.get("stdin"),
    }


def _session_id(args: Mapping[str, Any]) -> str:
    sid = args.get("session_id")
    if not isinstance(sid, str) or not sid:
        raise _BadArguments("session_id is required and must be a string")
    return sid


def _cell_request(args: Mapping[str, Any]) -> Dict[str, Any]:
    """A session cell for run_python's arguments with a session_id."""
    req = _eval_request(args)
    if req["stdin"] is not None or req["python_version"] is not None or req["network"]:
        raise _BadArguments("stdin, python_version and network do not apply to a session's cell (set them at create_session)")
    return {"session_id": _session_id(args), "code": args["code"], "files": req["files"][1:],
            "timeout_seconds": req["timeout_seconds"]}


def _create_request(args: Mapping[str, Any]) -> Dict[str, Any]:
    version = args.get("python_version")
    if version is not None and (not isinstance(version, str) or not _PYTHON_VERSION.match(version)):
        raise _BadArguments(f"python_version {version!r} is not MAJOR.MINOR, e.g. 3.12")
    idle = args.get("idle_timeout_seconds")
    if idle is not None and (not isinstance(idle, int) or idle < 1):
        raise _BadArguments("idle_timeout_seconds must be a positive integer")
    return {"python_version": version, "idle_timeout_seconds": idle, "network": bool(args.get("network"))}


def _prepare(name: str, arguments: Union[str, Mapping[str, Any], None]) -> Tuple[Optional[Tuple[str, Dict[str, Any]]], Optional[ToolOutcome]]:
    try:
        args = _arguments(arguments)
        if name == RUN_PYTHON and args.get("session_id") is not None:
            return ("cell", _cell_request(args)), None
        if name == RUN_PYTHON:
            return ("eval", _eval_request(args)), None
        if name == CREATE_SESSION:
            return ("create", _create_request(args)), None
        if name == CLOSE_SESSION:
            return ("close", {"session_id": _session_id(args)}), None
    except _BadArguments as e:
        return None, ToolOutcome(f"error: {e}\n", True)
    return None, ToolOutcome(f"error: unknown tool {name!r}; the tools are: {', '.join(TOOLS)}\n", True)


def _cell_outcome(r: CellResult) -> ToolOutcome:
    text = render_result(r)
    if r.result is not None:
        text += f"value: {r.result}\n"
    if r.session_ended:
        text += "the session ended; create a new one to continue\n"
    return ToolOutcome(text, _failed(r), r)


def _outcome(result: ExecutionResult) -> ToolOutcome:
    return ToolOutcome(render_result(result), _failed(result), result)


def run_tool(client: PyExec, name: str, arguments: Union[str, Mapping[str, Any], None]) -> ToolOutcome:
    """Run one tool call. ``arguments`` is the JSON text or the mapping the
    model produced. Mistakes the model can fix (bad arguments, an unknown
    version, a Python exception) come back as an error outcome, not an
    exception; a server that cannot be reached raises TransportError."""
    request, refused = _prepare(name, arguments)
    if refused is not None or request is None:
        return refused or ToolOutcome("error: no request\n", True)
    kind, req = request
    try:
        if kind == "eval":
            return _outcome(client.eval(**req))
        if kind == "create":
            s = client.session(**req)
            return ToolOutcome(f"session {s.id} started\n", False)
        session = Session(client, req["session_id"])
        if kind == "close":
            session.close()
            return ToolOutcome(f"session {session.id} closed\n", False)
        for f in req["files"]:
            session.upload(f["name"], f["content"].encode())
        return _cell_outcome(session.execute(req["code"], timeout_seconds=req["timeout_seconds"]))
    except APIError as e:
        return ToolOutcome(f"error: {e.message}\n", True)


async def arun_tool(client: AsyncPyExec, name: str, arguments: Union[str, Mapping[str, Any], None]) -> ToolOutcome:
    """run_tool for AsyncPyExec."""
    request, refused = _prepare(name, arguments)
    if refused is not None or request is None:
        return refused or ToolOutcome("error: no request\n", True)
    kind, req = request
    try:
        if kind == "eval":
            return _outcome(await client.eval(**req))
        if kind == "create":
            s = await client.session(**req)
            return ToolOutcome(f"session {s.id} started\n", False)
        session = AsyncSession(client, session_id=req["session_id"])
        if kind == "close":
            await session.close()
            return ToolOutcome(f"session {session.id} closed\n", False)
        for f in req["files"]:
            await session.upload(f["name"], f["content"].encode())
        return _cell_outcome(await session.execute(req["code"], timeout_seconds=req["timeout_seconds"]))
    except APIError as e:
        return ToolOutcome(f"error: {e.message}\n", True)


def _get(obj: Any, key: str) -> Any:
    """A field of an SDK object or of its dict form."""
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _openai_call(tool_call: Any) -> Tuple[str, str, Any]:
    fn = _get(tool_call, "function")
    return _get(tool_call, "id"), _get(fn, "name"), _get(fn, "arguments")


def openai_tool_message(client: PyExec, tool_call: Any) -> Dict[str, Any]:
    """Run an OpenAI Chat Completions tool call (an SDK object or its dict)
    and return the ``{"role": "tool", ...}`` message that answers it."""
    call_id, name, args = _openai_call(tool_call)
    return {"role": "tool", "tool_call_id": call_id, "content": run_tool(client, name, args).text}


async def aopenai_tool_message(client: AsyncPyExec, tool_call: Any) -> Dict[str, Any]:
    """openai_tool_message for AsyncPyExec."""
    call_id, name, args = _openai_call(tool_call)
    return {"role": "tool", "tool_call_id": call_id, "content": (await arun_tool(client, name, args)).text}


def _anthropic_result(block: Any, outcome: ToolOutcome) -> Dict[str, Any]:
    msg: Dict[str, Any] = {"type": "tool_result", "tool_use_id": _get(block, "id"), "content": outcome.text}
    if outcome.is_error:
        msg["is_error"] = True
    return msg


def anthropic_tool_result(client: PyExec, block: Any) -> Dict[str, Any]:
    """Run an Anthropic ``tool_use`` content block (an SDK object or its
    dict) and return the ``tool_result`` block to send back in a user
    message."""
    return _anthropic_result(block, run_tool(client, _get(block, "name"), _get(block, "input")))


async def aanthropic_tool_result(client: AsyncPyExec, block: Any) -> Dict[str, Any]:
    """anthropic_tool_result for AsyncPyExec."""
    return _anthropic_result(block, await arun_tool(client, _get(block, "name"), _get(block, "input")))
