"""A live pyexec server for the tests: built from this repository and
started once per session on a free loopback port, with an API key."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
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

    def wait_idle(self, timeout: float = 15.0) -> None:
        """Waits until the server runs and queues nothing (GET /readyz), as
        the tests that fill its two slots and two places need; fails naming
        the load it still has after timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            load = httpx.get(self.url + "/readyz", timeout=5).json()
            if load.get("running") == 0 and load.get("queued") == 0:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"the server is still busy {timeout:.0f}s after the previous tests: {load}")
            time.sleep(0.05)


def skip_install_error(result) -> None:
    """Skips a test whose requirements could not be installed from the
    package index (PyPI unreachable), naming the installer's error."""
    if getattr(result, "reason", None) == "install_error":
        pytest.skip(f"installing from the package index failed: {result.error}")


def _launcher(tmp: Path) -> str:
    """The test server launcher (internal/testserver/cmd/testserver):
    $PYEXEC_TESTSERVER, else built into tmp."""
    launcher = os.environ.get("PYEXEC_TESTSERVER")
    if not launcher:
        launcher = str(tmp / "testserver")
        subprocess.run(["go", "build", "-o", launcher, "./internal/testserver/cmd/testserver"], cwd=REPO, check=True)
    return launcher


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """One `pyexec serve` for the session, started by the launcher (which
    builds pyexec unless $PYEXEC_BINARY names one, and removes the data
    directory and the jails' cgroup parent when its stdin closes)."""
    tmp = Path(tempfile.mkdtemp(prefix="pyexec-pytest-"))
    args = ["--max-concurrency", "2", "--queue-size", "2", "--default-timeout", "30s", "--log-level", "warn"]
    # Import detection and the base environment are off (they would
    # install packages from PyPI behind the tests' back); requirements
    # the tests name (matplotlib for plots) are installed with uv into
    # the environment cache, which later runs reuse.
    args += ["--no-detect-imports", "--base-packages", "-"]
    # Previews on: the preview tests and the tool list (TOOLS) need them.
    args.append("--preview")
    uv, ruff, no_tools = _deps.tools()
    if ruff:
        args += ["--ruff", ruff, "--uv", uv]
    if os.geteuid() != 0:
        # Jails need root here; the tests only run their own code.
        args.append("--unsafe-no-isolation")
    proc = subprocess.Popen([_launcher(tmp), "-api-key", "pytest", "--", *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the test server did not start (launcher exited with {proc.wait()})")
        info = json.loads(line)
        yield Server(url=info["url"], api_key=info["api_key"], binary=info["binary"], no_tools=no_tools)
    finally:
        proc.stdin.close()  # the launcher stops the server and cleans up
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def px(server: Server) -> Iterator[PyExec]:
    with PyExec(server.url, api_key=server.api_key, timeout=60) as client:
        yield client


@pytest.fixture
async def apx(server: Server) -> AsyncIterator[AsyncPyExec]:
    async with AsyncPyExec(server.url, api_key=server.api_key, timeout=60) as client:
        yield client
