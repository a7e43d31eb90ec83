"""A live pyexec server for the tests: built from this repository and
started once per session on a free loopback port, with an API key."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Iterator

import httpx
import pytest

import _deps

from pyexec_client import AsyncPyExec, PyExec

REPO = Path(__file__).resolve().parents[2]
CGROUP_PARENT = f"pyexec-pytest-{os.getpid()}"


@dataclass(frozen=True)
class Server:
    url: str
    api_key: str
    binary: str
    #: Why the server cannot lint or install requirements ("" when it can).
    no_tools: str = ""

    def need_tools(self) -> None:
        """Skips the test when the server has no ruff and uv."""
        if self.no_tools:
            pytest.skip(self.no_tools)


def skip_install_error(result) -> None:
    """Skips a test whose requirements could not be installed from the
    package index (PyPI unreachable), naming the installer's error."""
    if getattr(result, "reason", None) == "install_error":
        pytest.skip(f"installing from the package index failed: {result.error}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _remove_cgroup_parents() -> None:
    """Remove the (empty) cgroup parents the server made for its jails."""
    for dirpath, dirnames, _ in os.walk("/sys/fs/cgroup"):
        if os.path.basename(dirpath) == CGROUP_PARENT:
            for sub in sorted(Path(dirpath).rglob("*"), reverse=True):
                if sub.is_dir():
                    try:
                        sub.rmdir()
                    except OSError:
                        pass
            try:
                os.rmdir(dirpath)
            except OSError:
                pass
            dirnames[:] = []


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    tmp = Path(tempfile.mkdtemp(prefix="pyexec-pytest-"))
    binary = os.environ.get("PYEXEC_BINARY")
    if not binary:
        binary = str(tmp / "pyexec")
        subprocess.run(["go", "build", "-o", binary, "./cmd/pyexec"], cwd=REPO, check=True)
    key = secrets.token_hex(16)
    port = _free_port()
    args = [binary, "serve", "--port", str(port), "--data-dir", str(tmp / "data"),
            "--cgroup-parent", CGROUP_PARENT, "--api-keys", f"pytest:{key}",
            "--max-concurrency", "2", "--queue-size", "2", "--default-timeout", "30s", "--log-level", "warn"]
    # Import detection and the base environment are off (they would
    # install packages from PyPI behind the tests' back); requirements
    # the tests name (matplotlib for plots) are installed with uv into
    # the environment cache, which later runs reuse.
    args += ["--no-detect-imports", "--base-packages", "-"]
    uv, ruff, no_tools = _deps.tools()
    if ruff:
        args += ["--ruff", ruff, "--uv", uv]
    if os.geteuid() != 0:
        # Jails need root here; the tests only run their own code.
        args.append("--unsafe-no-isolation")
    log = open(tmp / "server.log", "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"pyexec serve exited with {proc.returncode}:\n{(tmp / 'server.log').read_text()}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"pyexec serve did not start:\n{(tmp / 'server.log').read_text()}")
            time.sleep(0.1)
        yield Server(url=url, api_key=key, binary=binary, no_tools=no_tools)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        if proc.returncode not in (0, -signal.SIGTERM):
            sys.stderr.write((tmp / "server.log").read_text())
        _remove_cgroup_parents()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def px(server: Server) -> Iterator[PyExec]:
    with PyExec(server.url, api_key=server.api_key, timeout=60) as client:
        yield client


@pytest.fixture
async def apx(server: Server) -> AsyncIterator[AsyncPyExec]:
    async with AsyncPyExec(server.url, api_key=server.api_key, timeout=60) as client:
        yield client
