"""list_workspaces, list_workspace_files, read_workspace_file and
write_workspace_file for the tool-call helpers: their arguments and the
text a model reads, laid out as the MCP server lays it out
(internal/mcpserver/workspaces.go)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._file_tools import DEFAULT_READ_BYTES, MAX_READ_BYTES, BadArguments

LIST_WORKSPACES = "list_workspaces"
LIST_WORKSPACE_FILES = "list_workspace_files"
READ_WORKSPACE_FILE = "read_workspace_file"
WRITE_WORKSPACE_FILE = "write_workspace_file"
NAMES = (LIST_WORKSPACES, LIST_WORKSPACE_FILES, READ_WORKSPACE_FILE, WRITE_WORKSPACE_FILE)

#: Entries list_workspace_files shows at most.
MAX_LISTED = 1000


def _string(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise BadArguments(f"{key} is required and must be a string")
    return value


def mode(args: Mapping[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """The workspace and workspace_mode of run_python's or create_session's
    arguments."""
    ws = args.get("workspace")
    if ws is not None and (not isinstance(ws, str) or not ws):
        raise BadArguments("workspace must be a workspace's name")
    ro = args.get("workspace_read_only")
    if ro is not None and not isinstance(ro, bool):
        raise BadArguments("workspace_read_only must be true or false")
    if ro and ws is None:
        raise BadArguments("workspace_read_only needs a workspace")
    return ws, "ro" if ro else None


def request(name: str, args: Mapping[str, Any]) -> Dict[str, Any]:
    """The checked arguments of one of NAMES."""
    if name == LIST_WORKSPACES:
        return {}
    if name == LIST_WORKSPACE_FILES:
        d = args.get("dir")
        if d is not None and not isinstance(d, str):
            raise BadArguments("dir must be a string")
        return {"name": _string(args, "workspace"), "dir": d}
    if name == READ_WORKSPACE_FILE:
        offset, max_bytes = args.get("offset", 0), args.get("max_bytes", DEFAULT_READ_BYTES)
        if not isinstance(offset, int) or offset < 0 or not isinstance(max_bytes, int) or not 1 <= max_bytes <= MAX_READ_BYTES:
            raise BadArguments(f"offset must be at least 0 and max_bytes between 1 and {MAX_READ_BYTES}")
        return {"name": _string(args, "workspace"), "path": _string(args, "path"), "offset": offset, "max_bytes": max_bytes}
    content = args.get("content")
    if not isinstance(content, str):
        raise BadArguments("content is required and must be a string")
    return {"name": _string(args, "workspace"), "path": _string(args, "path"), "data": content}


def render_list(workspaces: List[Dict[str, Any]]) -> str:
    if not workspaces:
        return "You have no workspaces.\n"
    return "".join(f"{w['name']}: version {w['version']}, {w['files']} files, {w['bytes']} bytes of {w['quota_bytes']}\n"
                   for w in workspaces)


def render_files(name: str, files: List[Dict[str, Any]]) -> str:
    if not files:
        return f"Workspace {name} has nothing there.\n"
    out = []
    for f in files[:MAX_LISTED]:
        if f["type"] == "file":
            out.append(f"{f['path']} ({f['size']} bytes)")
        elif f["type"] == "dir":
            out.append(f["path"] + "/")
        else:
            out.append(f"{f['path']} -> {f.get('target', '')}")
    if len(files) > MAX_LISTED:
        out.append(f"... and {len(files) - MAX_LISTED} more; list a folder to see them")
    return "\n".join(out) + "\n"


def _binary(req: Mapping[str, Any]) -> str:
    return (f"{req['path']} is binary; read it from code: run_python with workspace {req['name']!r} sees it at "
            f"/workspace/{req['path'].lstrip('/')}\n")


def _text(window: bytes) -> Optional[str]:
    """window as text, allowing a UTF-8 sequence cut at its end; None when
    it is not text."""
    if b"\0" in window:
        return None
    for cut in range(4):
        try:
            return window[:len(window) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def render_read(req: Mapping[str, Any], data: bytes) -> str:
    """A window of a text file (data is the whole file), or a note for a
    binary one."""
    offset, want = req["offset"], req["max_bytes"]
    text = _text(data[offset:offset + want + 1])
    if text is None:
        return _binary(req)
    if len(data) - offset > want:
        shown = _text(data[offset:offset + want]) or ""
        nxt = offset + len(shown.encode("utf-8"))
        return shown + f"\n[{req['path']}: bytes {offset}-{nxt} shown; call read_workspace_file with offset {nxt} to read on]\n"
    if not text:
        return f"[{req['path']}: nothing at offset {offset}]\n"
    return text


def render_write(req: Mapping[str, Any], commit: Mapping[str, Any]) -> str:
    out = [f"wrote {req['path']} ({len(req['data'].encode())} bytes); workspace {req['name']} is at version "
           f"{commit['version']}"]
    for c in commit.get("conflicts") or []:
        line = f"conflict: {c['path']}: {c['reason']}"
        if c.get("kept_as"):
            line += f"; this content is kept as {c['kept_as']}"
        out.append(line)
    return "\n".join(out) + "\n"


def workspace_line(ws: Optional[Mapping[str, Any]]) -> List[str]:
    """What became of a run's workspace, as run_python reports it."""
    if not ws:
        return []
    if ws.get("error"):
        return [f"workspace {ws['name']}: its changes were not kept: {ws['error']}"]
    if not ws.get("changed"):
        return [f"workspace {ws['name']}: unchanged, version {ws['version']}"]
    out = [f"workspace {ws['name']}: version {ws['version']} ({ws.get('added', 0)} added, {ws.get('modified', 0)} "
           f"modified, {ws.get('deleted', 0)} deleted)"]
    out += [f"workspace conflict: {c['path']}: {c['reason']} (kept as {c.get('kept_as', '')})"
            for c in ws.get("conflicts") or []]
    return out
