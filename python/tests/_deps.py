"""Tools the live server of the tests needs for its agent features, found
or installed once per machine in the cache the Go tests use: ruff for
lint and uv for installing requirements (matplotlib for the plots), at
the versions internal/pyenv/pyenvtest pins. tools() returns the reason
instead when they cannot be had (PyPI unreachable), so that the tests
needing them skip and say why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional, Tuple

#: Versions pinned by internal/pyenv/pyenvtest.
UV_VERSION, RUFF_VERSION = "0.13.9", "0.17.6"


def _user_cache() -> Path:
    """os.UserCacheDir of Go: $XDG_CACHE_HOME, else ~/.cache."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def _jail_visible(p: Path) -> Path:
    """The jail mounts tools at their own path, which cannot be under /tmp
    or /work; fall back to /var/tmp there, as the Go tests do."""
    s = str(p)
    if any(s == r or s.startswith(r + "/") for r in ("/tmp", "/work")):
        return Path("/var/tmp")
    return p


def tools() -> Tuple[Optional[str], Optional[str], str]:
    """(uv, ruff, "") or (None, None, why not): $PYEXEC_TEST_TOOLS or the
    Go tests' cache, installed with pip --target on first use."""
    d = os.environ.get("PYEXEC_TEST_TOOLS")
    tools_dir = Path(d) if d else _jail_visible(_user_cache()) / "pyexec-test-tools" / f"uv-{UV_VERSION}-ruff-{RUFF_VERSION}"
    uv, ruff = tools_dir / "bin" / "uv", tools_dir / "bin" / "ruff"
    if os.access(uv, os.X_OK) and os.access(ruff, os.X_OK):
        return str(uv), str(ruff), ""
    python = shutil.which("python3") or "python3"
    tmp = Path(str(tools_dir) + ".pytest-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    done = subprocess.run([python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--target",
                           str(tmp), f"uv=={UV_VERSION}", f"ruff=={RUFF_VERSION}"], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        return None, None, f"cannot install uv and ruff (PyPI unreachable?): {done.stderr[-500:]}"
    tools_dir.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(tools_dir, ignore_errors=True)
    tmp.rename(tools_dir)
    tools_dir.chmod(0o755)
    return str(uv), str(ruff), ""
