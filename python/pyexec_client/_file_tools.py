"""lint_python, list_files and read_file for the tool-call helpers: their
arguments, the calls they make and the text a model reads, laid out as
the MCP server lays it out (internal/mcpserver)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from .types import Diagnostic, FileInfo

LINT_PYTHON = "lint_python"
LIST_FILES = "list_files"
READ_FILE = "read_file"

#: What read_file returns at most: a text window by default and at most,
#: whole images and (described only) other binary files.
DEFAULT_READ_BYTES = 64 << 10
MAX_READ_BYTES = 1 << 20
MAX_IMAGE_BYTES = 4 << 20

#: Images a model can be shown.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_TEXT_TYPES = ("application/json", "application/xml", "application/javascript", "application/x-yaml",
               "application/yaml", "application/toml", "application/x-sh", "application/sql")


class BadArguments(ValueError):
    """Arguments a model got wrong; the message tells it how."""


def _string(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise BadArguments(f"{key} is required and must be a string")
    return value


def _strings(args: Mapping[str, Any], key: str) -> Optional[List[str]]:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadArguments(f"{key} must be a list of strings")
    return value


def lint_request(args: Mapping[str, Any]) -> Dict[str, Any]:
    """lint() keyword arguments for lint_python's arguments."""
    code = args.get("code")
    if not isinstance(code, str):
        raise BadArguments("code is required and must be a string")
    files: Optional[Dict[str, str]] = None
    if args.get("files"):
        files = {"main.py": code}
        for i, f in enumerate(args["files"]):
            if not isinstance(f, Mapping) or not isinstance(f.get("path"), str) or not isinstance(f.get("content"), str):
                raise BadArguments(f"files[{i}] must be an object with string path and content")
            if f["path"] in files:
                raise BadArguments(f"files[{i}]: {f['path']!r} is given twice (the code argument is main.py)")
            files[f["path"]] = f["content"]
    profile = args.get("profile")
    if profile is not None and not isinstance(profile, str):
        raise BadArguments("profile must be a string")
    return {"code": None if files else code, "files": files, "select": _strings(args, "select"),
            "ignore": _strings(args, "ignore"), "profile": profile}


def render_lint(diags: List[Diagnostic]) -> str:
    """One compiler-style line per problem, or a sentence saying there are none."""
    if not diags:
        return "No problems found.\n"
    lines = [f"{len(diags)} problem{'' if len(diags) == 1 else 's'} found:"]
    for d in diags:
        line = f"{d.filename}:{d.line}:{d.column}: {d.code or 'error'} {d.message}"
        if d.fix:
            line += f" (fix: {d.fix.get('message') or 'available'})"
        lines.append(line)
    return "\n".join(lines) + "\n"


def file_lines(files: List[FileInfo]) -> List[str]:
    """Files one per line, as list_files and run_python show them."""
    return [f"{f.path} ({f.size} bytes, {f.mime})" for f in files]


def render_files(execution_id: str, files: List[FileInfo]) -> str:
    """The text of list_files."""
    if not files:
        return f"Execution {execution_id} produced no files.\n"
    head = f"{len(files)} file{'' if len(files) == 1 else 's'} of execution {execution_id}:"
    return "\n".join([head, *file_lines(files)]) + "\n"


def list_request(args: Mapping[str, Any]) -> Dict[str, Any]:
    """list_files() keyword arguments for list_files' arguments."""
    return {"execution_id": _string(args, "execution_id")}


def read_request(args: Mapping[str, Any]) -> Tuple[str, str, int, int]:
    """(execution_id, path, offset, max_bytes) of read_file's arguments."""
    offset, max_bytes = args.get("offset") or 0, args.get("max_bytes") or DEFAULT_READ_BYTES
    if not isinstance(offset, int) or offset < 0:
        raise BadArguments("offset must be an integer of at least 0")
    if not isinstance(max_bytes, int) or not 1 <= max_bytes <= MAX_READ_BYTES:
        raise BadArguments(f"max_bytes must be an integer between 1 and {MAX_READ_BYTES}")
    return _string(args, "execution_id"), _string(args, "path").removeprefix("./"), offset, max_bytes


def find(execution_id: str, files: List[FileInfo], path: str) -> FileInfo:
    """The listed file at path; a missing one is an error naming those there are."""
    for f in files:
        if f.path == path:
            return f
    if not files:
        raise BadArguments(f"execution {execution_id} produced no files")
    names = ", ".join(f.path for f in files[:20]) + (f" and {len(files) - 20} more" if len(files) > 20 else "")
    raise BadArguments(f"execution {execution_id} has no file {path!r}; its files are: {names}")


def base_mime(mime: str) -> str:
    return mime.split(";", 1)[0].strip().lower()


def is_text(mime: str) -> bool:
    t = base_mime(mime)
    return t.startswith("text/") or t.endswith(("+json", "+xml")) or t in _TEXT_TYPES


def too_large(execution_id: str, f: FileInfo) -> Optional[str]:
    """Why read_file does not return a file whole, or None: images over
    MAX_IMAGE_BYTES and other binary files over MAX_READ_BYTES (text is
    returned a window at a time)."""
    mime = base_mime(f.mime)
    if is_text(mime):
        return None
    limit = MAX_IMAGE_BYTES if mime in IMAGE_TYPES else MAX_READ_BYTES
    if f.size <= limit:
        return None
    return (f"{f.path} is {f.mime} ({f.size} bytes), more than read_file returns ({limit} bytes); it stays available "
            f"for download from the API at /api/v1/executions/{execution_id}/files/{f.path}.\n")


def render_read(execution_id: str, f: FileInfo, data: bytes, offset: int,
                max_bytes: int) -> Tuple[str, Optional[Tuple[str, bytes]]]:
    """The text of read_file and the image to show, from the file's bytes
    (whole, or from offset on for text)."""
    mime = base_mime(f.mime)
    if mime in IMAGE_TYPES:
        return f"{f.path} ({f.mime}, {len(data)} bytes):\n", (mime, data)
    if not is_text(mime) and (b"\0" in data or not _utf8(data)):
        return (f"{f.path} is binary ({f.mime}, {f.size} bytes); it can be downloaded from the API at "
                f"/api/v1/executions/{execution_id}/files/{f.path}.\n"), None
    if not is_text(mime):
        data = data[offset:]
    window = data[:max_bytes]
    text = window.decode("utf-8", "ignore")
    if len(data) > max_bytes:
        shown = len(text.encode())
        nxt = offset + shown
        text += f"\n[{f.path}: bytes {offset}-{nxt} of {f.size} shown; call read_file with offset {nxt} to read on]\n"
    elif not window:
        text = f"[{f.path}: nothing at offset {offset}; the file has {f.size} bytes]\n"
    return text, None


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError as e:
        return e.start >= len(data) - 3  # a sequence cut at the end
