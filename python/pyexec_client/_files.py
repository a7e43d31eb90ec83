"""Lint and execution files, shared by PyExec and AsyncPyExec as mixins
over their ``_request`` and HTTP client."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Union
from urllib.parse import quote

import httpx

from . import _common as c
from .errors import TransportError
from .types import Diagnostic, FileInfo

#: Where download_file may write: a file path, or a directory that gets
#: the file's base name.
Dest = Union[str, "os.PathLike[str]"]


def file_path(execution_id: str, path: str) -> str:
    """The resource path of one file of an execution, each segment escaped."""
    segs = [quote(s, safe="") for s in path.lstrip("/").split("/")]
    return f"/api/v1/executions/{quote(execution_id, safe='')}/files/" + "/".join(segs)


def lint_body(code: Optional[str], files: Optional[c.EvalFiles], select: Optional[Sequence[str]],
              ignore: Optional[Sequence[str]], profile: Optional[str] = None) -> Dict[str, Any]:
    """The JSON body of POST /api/v1/lint."""
    body = c.eval_body(code, files, None, None, None, None, False, None)
    if profile is not None:
        body["profile"] = profile
    if select is not None:
        body["select"] = list(select)
    if ignore is not None:
        body["ignore"] = list(ignore)
    return body


def target(dest: Dest, path: str) -> Path:
    """The file download_file writes: dest, or dest/<base name> when dest
    is a directory."""
    p = Path(dest)
    return p / path.rsplit("/", 1)[-1] if p.is_dir() else p


class FilesMixin:
    """lint, list_files and download_file for PyExec."""

    base_url: str
    _headers: Dict[str, str]
    _http: httpx.Client

    _request: Callable[..., httpx.Response]

    def lint(self, code: Optional[str] = None, *, files: Optional[c.EvalFiles] = None,
             select: Optional[Sequence[str]] = None, ignore: Optional[Sequence[str]] = None,
             profile: Optional[str] = None) -> List[Diagnostic]:
        """Check code (as main.py) or files with the server's ruff without
        running anything; an empty list means the code is clean.
        ``profile`` is "default" (likely bugs only) or "strict" (nearly
        every rule); ``select``/``ignore`` replace the profile's rules."""
        body = lint_body(code, files, select, ignore, profile)
        return [Diagnostic.from_dict(d) for d in self._request("POST", "/api/v1/lint", json=body).json() or []]

    def list_files(self, execution_id: str) -> List[FileInfo]:
        """The files an execution wrote or changed (without content)."""
        data = self._request("GET", f"/api/v1/executions/{quote(execution_id, safe='')}/files").json()
        return [FileInfo.from_dict(f) for f in data.get("files") or []]

    def download_file(self, execution_id: str, path: str, dest: Optional[Dest] = None) -> Union[bytes, Path]:
        """Download one file of an execution by its listed path: its bytes,
        or, with ``dest`` (a file, or a directory that gets the base name),
        the path written. An unknown execution or file is NotFoundError."""
        if dest is None:
            return self._request("GET", file_path(execution_id, path)).content
        out = target(dest, path)
        hdrs = dict(self._headers, Accept="*/*")
        try:
            with self._http.stream("GET", self.base_url + file_path(execution_id, path), headers=hdrs) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise c.api_error(resp.status_code, resp.content, resp.headers.get("Retry-After"),
                                      resp.reason_phrase)
                with open(out, "wb") as f:
                    for chunk in resp.iter_bytes():
                        f.write(chunk)
        except httpx.TransportError as e:
            raise TransportError(f"downloading {path} of {execution_id}: {e}") from e
        return out


class AsyncFilesMixin:
    """lint, list_files and download_file for AsyncPyExec."""

    base_url: str
    _headers: Dict[str, str]
    _http: httpx.AsyncClient

    _request: Callable[..., Awaitable[httpx.Response]]

    async def lint(self, code: Optional[str] = None, *, files: Optional[c.EvalFiles] = None,
                   select: Optional[Sequence[str]] = None, ignore: Optional[Sequence[str]] = None,
                   profile: Optional[str] = None) -> List[Diagnostic]:
        """See PyExec.lint."""
        body = lint_body(code, files, select, ignore, profile)
        return [Diagnostic.from_dict(d) for d in (await self._request("POST", "/api/v1/lint", json=body)).json() or []]

    async def list_files(self, execution_id: str) -> List[FileInfo]:
        """See PyExec.list_files."""
        data = (await self._request("GET", f"/api/v1/executions/{quote(execution_id, safe='')}/files")).json()
        return [FileInfo.from_dict(f) for f in data.get("files") or []]

    async def download_file(self, execution_id: str, path: str, dest: Optional[Dest] = None) -> Union[bytes, Path]:
        """See PyExec.download_file."""
        if dest is None:
            return (await self._request("GET", file_path(execution_id, path))).content
        out = target(dest, path)
        hdrs = dict(self._headers, Accept="*/*")
        try:
            async with self._http.stream("GET", self.base_url + file_path(execution_id, path), headers=hdrs) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    raise c.api_error(resp.status_code, resp.content, resp.headers.get("Retry-After"),
                                      resp.reason_phrase)
                with open(out, "wb") as f:
                    async for chunk in resp.aiter_bytes():
                        f.write(chunk)
        except httpx.TransportError as e:
            raise TransportError(f"downloading {path} of {execution_id}: {e}") from e
        return out
