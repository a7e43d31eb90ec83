"""Workspaces: named file trees of an API key that outlive runs, shared by
PyExec and AsyncPyExec as mixins over their ``_request``.

A run or session given ``workspace="NAME"`` sees the workspace at
/workspace; what it leaves there is kept as the next version. Another
key's workspace is NotFoundError, as an unknown one (docs/workspaces.md).
Workspaces, files and versions come back as the API's JSON objects (dicts);
every change answers its commit: ``version``, ``base``, ``changed``,
``added``, ``modified``, ``deleted``, ``conflicts``, ``refused``."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, List, Optional, Union
from urllib.parse import quote

import httpx

from .tar import Project, tar_from_project


def workspace_path(name: str) -> str:
    return "/api/v1/workspaces/" + quote(name, safe="")


def workspace_file_path(name: str, path: str) -> str:
    """The resource of one file of a workspace, each segment escaped."""
    return workspace_path(name) + "/files/" + "/".join(quote(s, safe="") for s in path.lstrip("/").split("/"))


def params(**kw: Any) -> Dict[str, str]:
    """The query parameters that are set."""
    return {k: str(v) for k, v in kw.items() if v is not None and v != ""}


def create_body(name: str, quota_mb: Optional[int]) -> Dict[str, Any]:
    body: Dict[str, Any] = {"name": name}
    if quota_mb is not None:
        body["quota_mb"] = quota_mb
    return body


def data_of(data: Union[bytes, str]) -> bytes:
    return data.encode() if isinstance(data, str) else bytes(data)


class WorkspacesMixin:
    """The workspace calls of PyExec."""

    _request: Callable[..., httpx.Response]

    def create_workspace(self, name: str, *, quota_mb: Optional[int] = None) -> Dict[str, Any]:
        """Create an empty workspace (version 0); ``quota_mb`` defaults to the
        server's. One of that name already is an APIError of status
        409, a quota beyond the server's caps PayloadTooLargeError."""
        return self._request("POST", "/api/v1/workspaces", json=create_body(name, quota_mb)).json()

    def list_workspaces(self, *, all: bool = False) -> List[Dict[str, Any]]:
        """Your workspaces: owner, name, version, files, bytes, quota_bytes...
        With ``all=True`` an operator key lists every key's (another key
        gets its own)."""
        return self._request("GET", "/api/v1/workspaces", params=params(all="true" if all else None)).json()["workspaces"]

    def get_workspace(self, name: str) -> Dict[str, Any]:
        """One workspace and its current version."""
        return self._request("GET", workspace_path(name)).json()

    def delete_workspace(self, name: str) -> None:
        """Delete a workspace with all its versions."""
        self._request("DELETE", workspace_path(name))

    def workspace_versions(self, name: str) -> List[Dict[str, Any]]:
        """The kept versions, oldest first (number, parent, files, bytes,
        created, source)."""
        return self._request("GET", workspace_path(name) + "/versions").json()["versions"]

    def restore_workspace(self, name: str, version: int) -> Dict[str, Any]:
        """Make a new version equal to the kept ``version``; its commit."""
        return self._request("POST", workspace_path(name) + "/restore", json={"version": version}).json()

    def workspace_files(self, name: str, dir: Optional[str] = None, *,
                        version: Optional[int] = None, owner: Optional[str] = None) -> List[Dict[str, Any]]:
        """The entries (path, type file/dir/symlink, size, mode, mtime,
        sha256, target) below ``dir`` (all by default) of the current version
        or of a kept ``version``. ``owner`` names the key whose workspace it
        is: operator keys only (for another key, another's workspace is
        NotFoundError)."""
        return self._request("GET", workspace_path(name) + "/files",
                             params=params(dir=dir, version=version, owner=owner)).json()["files"]

    def read_workspace_file(self, name: str, path: str, *, version: Optional[int] = None) -> bytes:
        """The bytes of one file."""
        return self._request("GET", workspace_file_path(name, path), params=params(version=version)).content

    def write_workspace_file(self, name: str, path: str, data: Union[bytes, str]) -> Dict[str, Any]:
        """Write one file (text is UTF-8), making the folders above it; a
        new version. Its commit."""
        return self._request("PUT", workspace_file_path(name, path), content=data_of(data)).json()

    def upload_workspace(self, name: str, project: Project, *, dir: Optional[str] = None) -> Dict[str, Any]:
        """Unpack files into the folder ``dir`` (the top by default), all or
        nothing, as one version: ``project`` is a mapping of paths to
        contents, a directory, a file, or tar bytes (gzip accepted). Its
        commit."""
        return self._request("POST", workspace_path(name) + "/archive", params=params(dir=dir),
                             content=tar_from_project(project)).json()

    def download_workspace(self, name: str, dir: Optional[str] = None, *, version: Optional[int] = None) -> bytes:
        """A tar of the folder ``dir`` (all by default)."""
        return self._request("GET", workspace_path(name) + "/archive", params=params(dir=dir, version=version)).content

    def remove_workspace_file(self, name: str, path: str) -> Dict[str, Any]:
        """Delete a file, or a folder with what it holds; a new version. Its
        commit."""
        return self._request("DELETE", workspace_file_path(name, path)).json()


class AsyncWorkspacesMixin:
    """The workspace calls of AsyncPyExec (see WorkspacesMixin)."""

    _request: Callable[..., Awaitable[httpx.Response]]

    async def create_workspace(self, name: str, *, quota_mb: Optional[int] = None) -> Dict[str, Any]:
        """See PyExec.create_workspace."""
        return (await self._request("POST", "/api/v1/workspaces", json=create_body(name, quota_mb))).json()

    async def list_workspaces(self, *, all: bool = False) -> List[Dict[str, Any]]:
        """See PyExec.list_workspaces."""
        resp = await self._request("GET", "/api/v1/workspaces", params=params(all="true" if all else None))
        return resp.json()["workspaces"]

    async def get_workspace(self, name: str) -> Dict[str, Any]:
        """See PyExec.get_workspace."""
        return (await self._request("GET", workspace_path(name))).json()

    async def delete_workspace(self, name: str) -> None:
        """See PyExec.delete_workspace."""
        await self._request("DELETE", workspace_path(name))

    async def workspace_versions(self, name: str) -> List[Dict[str, Any]]:
        """See PyExec.workspace_versions."""
        return (await self._request("GET", workspace_path(name) + "/versions")).json()["versions"]

    async def restore_workspace(self, name: str, version: int) -> Dict[str, Any]:
        """See PyExec.restore_workspace."""
        return (await self._request("POST", workspace_path(name) + "/restore", json={"version": version})).json()

    async def workspace_files(self, name: str, dir: Optional[str] = None, *,
                              version: Optional[int] = None, owner: Optional[str] = None) -> List[Dict[str, Any]]:
        """See PyExec.workspace_files."""
        resp = await self._request("GET", workspace_path(name) + "/files",
                                   params=params(dir=dir, version=version, owner=owner))
        return resp.json()["files"]

    async def read_workspace_file(self, name: str, path: str, *, version: Optional[int] = None) -> bytes:
        """See PyExec.read_workspace_file."""
        return (await self._request("GET", workspace_file_path(name, path), params=params(version=version))).content

    async def write_workspace_file(self, name: str, path: str, data: Union[bytes, str]) -> Dict[str, Any]:
        """See PyExec.write_workspace_file."""
        return (await self._request("PUT", workspace_file_path(name, path), content=data_of(data))).json()

    async def upload_workspace(self, name: str, project: Project, *, dir: Optional[str] = None) -> Dict[str, Any]:
        """See PyExec.upload_workspace."""
        return (await self._request("POST", workspace_path(name) + "/archive", params=params(dir=dir),
                                    content=tar_from_project(project))).json()

    async def download_workspace(self, name: str, dir: Optional[str] = None, *,
                                 version: Optional[int] = None) -> bytes:
        """See PyExec.download_workspace."""
        return (await self._request("GET", workspace_path(name) + "/archive",
                                    params=params(dir=dir, version=version))).content

    async def remove_workspace_file(self, name: str, path: str) -> Dict[str, Any]:
        """See PyExec.remove_workspace_file."""
        return (await self._request("DELETE", workspace_file_path(name, path))).json()
