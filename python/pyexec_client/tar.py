"""Build the uncompressed tar archives that the exec endpoints take."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path, PurePosixPath
from typing import Iterable, Mapping, Union

#: A project: files as a mapping of path to content, a directory or file
#: path, or a tar archive already built.
Project = Union[Mapping[str, Union[str, bytes]], str, "os.PathLike[str]", bytes]

# Directories never worth uploading.
_SKIP_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache"})

# A fixed modification time keeps archives reproducible.
_MTIME = 1_700_000_000


def _clean(name: str) -> str:
    path = PurePosixPath(name.replace("\\", "/"))
    if not name or path.is_absolute() or ".." in path.parts or str(path) in ("", "."):
        raise ValueError(f"unsafe file name {name!r}: use a relative path inside the project")
    return str(path)


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(_clean(name))
    info.size = len(data)
    info.mode = mode
    info.mtime = _MTIME
    tar.addfile(info, io.BytesIO(data))


def tar_from_dict(files: Mapping[str, Union[str, bytes]]) -> bytes:
    """Return a tar of files, which maps relative paths to text or bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            content = files[name]
            _add(tar, name, content.encode() if isinstance(content, str) else bytes(content))
    return buf.getvalue()


def tar_from_directory(directory: Union[str, "os.PathLike[str]"]) -> bytes:
    """Return a tar of the regular files under directory (paths relative to
    it). Symbolic links and caches such as __pycache__ and .git are left out:
    the server refuses links."""
    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"not a directory: {root}")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not Path(dirpath, d).is_symlink())
            for fname in sorted(filenames):
                path = Path(dirpath, fname)
                if path.is_symlink() or not path.is_file():
                    continue
                mode = 0o755 if os.access(path, os.X_OK) else 0o644
                _add(tar, path.relative_to(root).as_posix(), path.read_bytes(), mode)
    return buf.getvalue()


def tar_from_project(project: Project) -> bytes:
    """Return the tar of a project: a mapping of files, a directory, a
    single file (stored under its own name) or tar bytes (returned as is)."""
    if isinstance(project, (bytes, bytearray)):
        return bytes(project)
    if isinstance(project, Mapping):
        return tar_from_dict(project)
    path = Path(project)
    if path.is_dir():
        return tar_from_directory(path)
    if path.is_file():
        if path.suffix == ".tar":
            return path.read_bytes()
        return tar_from_dict({path.name: path.read_bytes()})
    raise ValueError(f"path does not exist: {path}")


def tar_names(tar_data: bytes) -> Iterable[str]:
    """The names of the regular files in a tar."""
    with tarfile.open(fileobj=io.BytesIO(tar_data), mode="r:") as tar:
        return [m.name for m in tar.getmembers() if m.isfile()]


def detect_entrypoint(names: Iterable[str]) -> str:
    """Pick the file to run: main.py, else __main__.py, else the first .py
    file in name order. Raises ValueError when there is no Python file."""
    py = sorted(n for n in names if n.endswith(".py"))
    for preferred in ("main.py", "__main__.py"):
        if preferred in py:
            return preferred
    if py:
        return py[0]
    raise ValueError("no Python file found to use as entrypoint")
