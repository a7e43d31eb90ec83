"""Execute a model's tool calls with pyexec.

The tool definitions come from the server (``PyExec.tools("openai")``,
``PyExec.tools("openai-responses")`` or ``PyExec.tools("anthropic")``, i.e.
GET /api/v1/tools, optionally with ``strict=True``): the same tools, with the
same arguments, as pyexec's MCP server. These helpers run one call and
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

import base64
import json
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import _file_tools as ft
from . import _workspace_tools as wt
from ._file_tools import LINT_PYTHON, LIST_FILES, READ_FILE
from .aio import AsyncPyExec
from .client import PyExec
from .errors import APIError
from .sessions import AsyncSession, CellResult, Session
from .previews import PortShare
from .snapshots import SnapshotInfo, SnapshotSaved, Skipped
from .types import ExecutionResult, ExecutionStatus

__all__ = [
    "RUN_PYTHON", "LINT_PYTHON", "LIST_FILES", "READ_FILE", "CREATE_SESSION", "CLOSE_SESSION", "LIST_WORKSPACES",
    "LIST_WORKSPACE_FILES", "READ_WORKSPACE_FILE", "WRITE_WORKSPACE_FILE", "SNAPSHOT_SESSION", "FORK_SESSION",
    "LIST_SNAPSHOTS", "DELETE_SNAPSHOT", "PREVIEW_SESSION_PORT", "TOOLS", "ToolOutcome", "render_result", "run_tool",
    "arun_tool", "openai_tool_message", "aopenai_tool_message", "openai_response_output", "aopenai_response_output",
    "anthropic_tool_result", "aanthropic_tool_result",
]

#: Name of the code-running tool.
RUN_PYTHON = "run_python"
CREATE_SESSION = "create_session"
CLOSE_SESSION = "close_session"
LIST_WORKSPACES = wt.LIST_WORKSPACES
LIST_WORKSPACE_FILES = wt.LIST_WORKSPACE_FILES
READ_WORKSPACE_FILE = wt.READ_WORKSPACE_FILE
WRITE_WORKSPACE_FILE = wt.WRITE_WORKSPACE_FILE
SNAPSHOT_SESSION = "snapshot_session"
FORK_SESSION = "fork_session"
LIST_SNAPSHOTS = "list_snapshots"
DELETE_SNAPSHOT = "delete_snapshot"
#: Offered by servers started with --preview only.
PREVIEW_SESSION_PORT = "preview_session_port"
#: Every tool these helpers run, as GET /api/v1/tools lists them on a
#: server with --preview (without it, all but PREVIEW_SESSION_PORT).
TOOLS = (RUN_PYTHON, LINT_PYTHON, LIST_FILES, READ_FILE, CREATE_SESSION, CLOSE_SESSION, SNAPSHOT_SESSION, FORK_SESSION,
         LIST_SNAPSHOTS, DELETE_SNAPSHOT, PREVIEW_SESSION_PORT) + wt.NAMES
#: Plots one run_python result carries as images at most.
MAX_IMAGES = 8

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
    #: Images to show the model, as (MIME type, bytes): run_python's plots,
    #: read_file's image. The Anthropic helpers send them; OpenAI tool
    #: messages carry text only.
    images: Tuple[Tuple[str, bytes], ...] = ()


_BadArguments = ft.BadArguments


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
    return "\n".join(out + wt.workspace_line(r.workspace) + _rich_lines(r)) + "\n"


def _rich_lines(r: ExecutionResult) -> List[str]:
    """The results, rich outputs and files of a result, as the MCP server
    lists them after the output."""
    out: List[str] = []
    if r.results is not None:
        out += ["--- results ---", json.dumps(r.results, separators=(",", ":"))]
    images = 0
    for i, o in enumerate(r.outputs, 1):
        img = o.image()
        if img is not None and img[0] in ft.IMAGE_TYPES:
            if images < MAX_IMAGES:
                images += 1
                out.append(f"--- output {i}: {img[0]}, image {images} below ---")
            else:
                out.append(f"--- output {i}: {img[0]}, left out (at most {MAX_IMAGES} images per result) ---")
            continue
        out.append(f"--- output {i} ({', '.join(sorted(o.data))}) ---")
        text = o.plain or ""
        out.append(text[:-1] if text.endswith("\n") else text)
    if r.outputs_truncated:
        out.append("[further outputs left out at the server's size limit]")
    if r.files:
        out.append(f"--- files (read one with read_file, execution_id {r.execution_id}) ---")
        out += ft.file_lines(r.files)
    if r.files_omitted:
        out.append(f"[{r.files_omitted} more file{'' if r.files_omitted == 1 else 's'} not collected: over the "
                   "server's limits]")
    return out


def _images(r: ExecutionResult) -> Tuple[Tuple[str, bytes], ...]:
    return tuple(img for img in r.images if img[0] in ft.IMAGE_TYPES)[:MAX_IMAGES]


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
    # OpenAI strict mode sends every argument, null for those not given.
    return {k: v for k, v in arguments.items() if v is not None}


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
    reqs = args.get("requirements") or []
    if not isinstance(reqs, list) or not all(isinstance(x, str) for x in reqs):
        raise _BadArguments("requirements must be a list of strings")
    for i, req in enumerate(reqs):
        if not req.strip() or "\n" in req or "\r" in req or req.strip().startswith("-"):
            raise _BadArguments(f"requirements[{i}]: {req!r} is not one package, e.g. pandas or requests==2.32.3")
    allow = args.get("network_allow")
    if allow is not None and (not isinstance(allow, list) or not all(isinstance(x, str) for x in allow)):
        raise _BadArguments("network_allow must be a list of strings")
    secrets = args.get("secrets")
    if secrets is not None and (not isinstance(secrets, list) or not all(isinstance(x, str) for x in secrets)):
        raise _BadArguments("secrets must be a list of strings")
    ws, ws_mode = wt.mode(args)
    return {
        "requirements": "".join(x.strip() + "\n" for x in reqs) or None,
        "files": files,
        "entrypoint": _ENTRYPOINT,
        "python_version": version,
        "timeout_seconds": timeout,
        # A list narrows the operator's destinations (and asks for network).
        # Secrets ask for network too.
        "network": list(allow) if allow else bool(args.get("network") or secrets),
        "secrets": list(secrets) if secrets else None,
        "stdin": args.get("stdin"),
        "workspace": ws,
        "workspace_mode": ws_mode,
    }


def _session_id(args: Mapping[str, Any]) -> str:
    sid = args.get("session_id")
    if not isinstance(sid, str) or not sid:
        raise _BadArguments("session_id is required and must be a string")
    return sid


def _preview_request(args: Mapping[str, Any]) -> Dict[str, Any]:
    port, revoke = args.get("port"), args.get("revoke", False)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise _BadArguments("port is required and must be an integer from 1 to 65535")
    if not isinstance(revoke, bool):
        raise _BadArguments("revoke must be a boolean")
    return {"session_id": _session_id(args), "port": port, "revoke": revoke}


def _preview_outcome(req: Mapping[str, Any], share: Optional[PortShare], revoked: int) -> ToolOutcome:
    """The text of preview_session_port, as the MCP server renders it."""
    where = f"port {req['port']} of session {req['session_id']}"
    if share is None:
        return ToolOutcome(f"revoked {revoked} preview URL(s) of {where}\n", False)
    expires = share.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ") if share.expires_at else ""
    return ToolOutcome(f"preview of {where}: {share.url}\nexpires at {expires} (isolation: {share.isolation})\n", False)


def _cell_request(args: Mapping[str, Any]) -> Dict[str, Any]:
    """A session cell for run_python's arguments with a session_id."""
    req = _eval_request(args)
    if (req["stdin"] is not None or req["python_version"] is not None or req["network"] or req["requirements"]
            or req["workspace"] is not None):
        raise _BadArguments("stdin, python_version, network, secrets, workspace and requirements do not apply to a "
                            "session's cell (set them at create_session)")
    return {"session_id": _session_id(args), "code": args["code"], "files": req["files"][1:],
            "timeout_seconds": req["timeout_seconds"]}


def _create_request(args: Mapping[str, Any]) -> Dict[str, Any]:
    version = args.get("python_version")
    if version is not None and (not isinstance(version, str) or not _PYTHON_VERSION.match(version)):
        raise _BadArguments(f"python_version {version!r} is not MAJOR.MINOR, e.g. 3.12")
    idle = args.get("idle_timeout_seconds")
    if idle is not None and (not isinstance(idle, int) or idle < 1):
        raise _BadArguments("idle_timeout_seconds must be a positive integer")
    ws, ws_mode = wt.mode(args)
    snap = args.get("from_snapshot")
    if snap is not None and (not isinstance(snap, str) or not snap):
        raise _BadArguments("from_snapshot must be a snapshot_id from snapshot_session")
    return {"python_version": version, "idle_timeout_seconds": idle, "network": bool(args.get("network")),
            "workspace": ws, "workspace_mode": ws_mode, "from_snapshot": snap}


def _snapshot_id(args: Mapping[str, Any]) -> str:
    sid = args.get("snapshot_id")
    if not isinstance(sid, str) or not sid:
        raise _BadArguments("snapshot_id is required and must be a string")
    return sid


def _skipped_text(skipped: Tuple[Skipped, ...]) -> str:
    return "".join(f"skipped {s.name}: {s.reason}\n" for s in skipped)


def _saved_outcome(session_id: str, s: SnapshotSaved) -> ToolOutcome:
    return ToolOutcome(f"session {session_id} saved as snapshot {s.snapshot_id} ({s.bytes} bytes, {len(s.saved)} "
                       f"variables)\n{_skipped_text(s.skipped)}", False)


def _snapshots_outcome(snaps: List[SnapshotInfo]) -> ToolOutcome:
    lines = [f"{s.snapshot_id}  of {s.session_id}  Python {s.python_version}  {s.execution_count} cells  {s.bytes} bytes  "
             + (s.created_at.strftime("%Y-%m-%dT%H:%M:%SZ") if s.created_at else "") for s in snaps]
    return ToolOutcome("".join(x + "\n" for x in lines) or "no snapshots\n", False)


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
        if name == SNAPSHOT_SESSION:
            return ("snapshot", {"session_id": _session_id(args)}), None
        if name == FORK_SESSION:
            return ("fork", {"session_id": _session_id(args)}), None
        if name == LIST_SNAPSHOTS:
            return ("snapshots", {}), None
        if name == DELETE_SNAPSHOT:
            return ("delete_snapshot", {"snapshot_id": _snapshot_id(args)}), None
        if name == PREVIEW_SESSION_PORT:
            return ("preview", _preview_request(args)), None
        if name == LINT_PYTHON:
            return ("lint", ft.lint_request(args)), None
        if name == LIST_FILES:
            return ("list", ft.list_request(args)), None
        if name in wt.NAMES:
            return (name, wt.request(name, args)), None
        if name == READ_FILE:
            execution_id, path, offset, max_bytes = ft.read_request(args)
            return ("read", {"execution_id": execution_id, "path": path, "offset": offset, "max_bytes": max_bytes}), None
    except _BadArguments as e:
        return None, ToolOutcome(f"error: {e}\n", True)
    return None, ToolOutcome(f"error: unknown tool {name!r}; the tools are: {', '.join(TOOLS)}\n", True)


def _cell_outcome(r: CellResult) -> ToolOutcome:
    text = render_result(r)
    if r.result is not None:
        text += f"value: {r.result}\n"
    if r.resumed:
        text += ("the session had been idle and hibernated: it was resumed for this call (threads, open files and "
                 "sockets did not survive)\n")
    if r.session_ended:
        text += "the session ended; create a new one to continue\n"
    return ToolOutcome(text, _failed(r), r, _images(r))


def _outcome(result: ExecutionResult) -> ToolOutcome:
    return ToolOutcome(render_result(result), _failed(result), result, _images(result))


def _read_outcome(execution_id: str, f: Any, data: bytes, offset: int, max_bytes: int) -> ToolOutcome:
    text, image = ft.render_read(execution_id, f, data, offset, max_bytes)
    return ToolOutcome(text, False, images=(image,) if image else ())


def run_tool(client: PyExec, name: str, arguments: Union[str, Mapping[str, Any], None]) -> ToolOutcome:
    """Run one tool call (any of TOOLS). ``arguments`` is the JSON text or
    the mapping the model produced. Mistakes the model can fix (bad
    arguments, an unknown version or file, a Python exception) come back as
    an error outcome, not an exception; a server that cannot be reached
    raises TransportError."""
    request, refused = _prepare(name, arguments)
    if refused is not None or request is None:
        return refused or ToolOutcome("error: no request\n", True)
    kind, req = request
    try:
        if kind == "eval":
            return _outcome(client.eval(**req))
        if kind == "lint":
            return ToolOutcome(ft.render_lint(client.lint(**req)), False)
        if kind in ("list", "read"):
            files = client.list_files(req["execution_id"])
            if kind == "list":
                return ToolOutcome(ft.render_files(req["execution_id"], files), False)
            f = ft.find(req["execution_id"], files, req["path"])
            note = ft.too_large(req["execution_id"], f)
            if note:
                return ToolOutcome(note, False)
            data = client.download_file(req["execution_id"], f.path)
            return _read_outcome(req["execution_id"], f, _window(f, data, req), req["offset"], req["max_bytes"])
        if kind == LIST_WORKSPACES:
            return ToolOutcome(wt.render_list(client.list_workspaces()), False)
        if kind == LIST_WORKSPACE_FILES:
            return ToolOutcome(wt.render_files(req["name"], client.workspace_files(req["name"], req["dir"])), False)
        if kind == READ_WORKSPACE_FILE:
            return ToolOutcome(wt.render_read(req, client.read_workspace_file(req["name"], req["path"])), False)
        if kind == WRITE_WORKSPACE_FILE:
            return ToolOutcome(wt.render_write(req, client.write_workspace_file(req["name"], req["path"], req["data"])), False)
        if kind == "create":
            s = client.session(**req)
            return ToolOutcome(f"session {s.id} started\n", False)
        if kind == "snapshots":
            return _snapshots_outcome(client.list_snapshots())
        if kind == "delete_snapshot":
            client.delete_snapshot(req["snapshot_id"])
            return ToolOutcome(f"snapshot {req['snapshot_id']} deleted\n", False)
        session = Session(client, req["session_id"])
        if kind == "close":
            session.close()
            return ToolOutcome(f"session {session.id} closed\n", False)
        if kind == "snapshot":
            return _saved_outcome(session.id, session.snapshot())
        if kind == "fork":
            return ToolOutcome(f"session {session.fork().id} forked from {session.id}\n", False)
        if kind == "preview" and req["revoke"]:
            return _preview_outcome(req, None, session.revoke_port(req["port"]))
        if kind == "preview":
            return _preview_outcome(req, session.share_port(req["port"]), 0)
        for f in req["files"]:
            session.upload(f["name"], f["content"].encode())
        return _cell_outcome(session.execute(req["code"], timeout_seconds=req["timeout_seconds"]))
    except _BadArguments as e:
        return ToolOutcome(f"error: {e}\n", True)
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
        if kind == "lint":
            return ToolOutcome(ft.render_lint(await client.lint(**req)), False)
        if kind in ("list", "read"):
            files = await client.list_files(req["execution_id"])
            if kind == "list":
                return ToolOutcome(ft.render_files(req["execution_id"], files), False)
            f = ft.find(req["execution_id"], files, req["path"])
            note = ft.too_large(req["execution_id"], f)
            if note:
                return ToolOutcome(note, False)
            data = await client.download_file(req["execution_id"], f.path)
            return _read_outcome(req["execution_id"], f, _window(f, data, req), req["offset"], req["max_bytes"])
        if kind == LIST_WORKSPACES:
            return ToolOutcome(wt.render_list(await client.list_workspaces()), False)
        if kind == LIST_WORKSPACE_FILES:
            return ToolOutcome(wt.render_files(req["name"], await client.workspace_files(req["name"], req["dir"])), False)
        if kind == READ_WORKSPACE_FILE:
            return ToolOutcome(wt.render_read(req, await client.read_workspace_file(req["name"], req["path"])), False)
        if kind == WRITE_WORKSPACE_FILE:
            commit = await client.write_workspace_file(req["name"], req["path"], req["data"])
            return ToolOutcome(wt.render_write(req, commit), False)
        if kind == "create":
            s = await client.session(**req)
            return ToolOutcome(f"session {s.id} started\n", False)
        if kind == "snapshots":
            return _snapshots_outcome(await client.list_snapshots())
        if kind == "delete_snapshot":
            await client.delete_snapshot(req["snapshot_id"])
            return ToolOutcome(f"snapshot {req['snapshot_id']} deleted\n", False)
        session = AsyncSession(client, session_id=req["session_id"])
        if kind == "close":
            await session.close()
            return ToolOutcome(f"session {session.id} closed\n", False)
        if kind == "snapshot":
            return _saved_outcome(session.id, await session.snapshot())
        if kind == "fork":
            return ToolOutcome(f"session {(await session.fork()).id} forked from {session.id}\n", False)
        if kind == "preview" and req["revoke"]:
            return _preview_outcome(req, None, await session.revoke_port(req["port"]))
        if kind == "preview":
            return _preview_outcome(req, await session.share_port(req["port"]), 0)
        for f in req["files"]:
            await session.upload(f["name"], f["content"].encode())
        return _cell_outcome(await session.execute(req["code"], timeout_seconds=req["timeout_seconds"]))
    except _BadArguments as e:
        return ToolOutcome(f"error: {e}\n", True)
    except APIError as e:
        return ToolOutcome(f"error: {e.message}\n", True)


def _window(f: Any, data: Any, request: Mapping[str, Any]) -> bytes:
    """The bytes render_read works on: from the offset on for text files,
    whole otherwise."""
    return data[request["offset"]:] if ft.is_text(f.mime) else data


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


def _response_output(item: Any, outcome: ToolOutcome) -> Dict[str, Any]:
    output: Any = outcome.text
    if outcome.images:
        output = [{"type": "input_text", "text": outcome.text}] + [
            {"type": "input_image", "image_url": f"data:{mime};base64,{base64.b64encode(data).decode()}", "detail": "auto"}
            for mime, data in outcome.images]
    return {"type": "function_call_output", "call_id": _get(item, "call_id"), "output": output}


def openai_response_output(client: PyExec, item: Any) -> Dict[str, Any]:
    """Run an OpenAI Responses API ``function_call`` output item (an SDK
    object or its dict) and return the ``function_call_output`` input item
    that answers it. Plots and images read with read_file come as
    ``input_image`` parts (data URLs) after the text."""
    return _response_output(item, run_tool(client, _get(item, "name"), _get(item, "arguments")))


async def aopenai_response_output(client: AsyncPyExec, item: Any) -> Dict[str, Any]:
    """openai_response_output for AsyncPyExec."""
    return _response_output(item, await arun_tool(client, _get(item, "name"), _get(item, "arguments")))


def _anthropic_result(block: Any, outcome: ToolOutcome) -> Dict[str, Any]:
    content: Any = outcome.text
    if outcome.images:
        content = [{"type": "text", "text": outcome.text}] + [
            {"type": "image", "source": {"type": "base64", "media_type": mime, "data": base64.b64encode(data).decode()}}
            for mime, data in outcome.images]
    msg: Dict[str, Any] = {"type": "tool_result", "tool_use_id": _get(block, "id"), "content": content}
    if outcome.is_error:
        msg["is_error"] = True
    return msg


def anthropic_tool_result(client: PyExec, block: Any) -> Dict[str, Any]:
    """Run an Anthropic ``tool_use`` content block (an SDK object or its
    dict) and return the ``tool_result`` block to send back in a user
    message. Plots and images read with read_file come as image blocks
    after the text."""
    return _anthropic_result(block, run_tool(client, _get(block, "name"), _get(block, "input")))


async def aanthropic_tool_result(client: AsyncPyExec, block: Any) -> Dict[str, Any]:
    """anthropic_tool_result for AsyncPyExec."""
    return _anthropic_result(block, await arun_tool(client, _get(block, "name"), _get(block, "input")))
