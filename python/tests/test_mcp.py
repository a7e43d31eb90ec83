"""pyexec's MCP server driven by an independent client: the official
Python MCP SDK, over stdio (`pyexec mcp --server ...`) and over streamable
HTTP (/mcp on `pyexec serve`)."""

from __future__ import annotations

import base64
import contextlib
import sys
import time
from typing import AsyncIterator, List

import anyio
import pytest

mcp = pytest.importorskip("mcp", reason="the MCP SDK needs Python 3.10+")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from pyexec_client import ExecutionStatus  # noqa: E402


@contextlib.asynccontextmanager
async def stdio_session(server) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=server.binary,
                                   args=["mcp", "--server", server.url, "--api-key", server.api_key])
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


@contextlib.asynccontextmanager
async def http_session(server) -> AsyncIterator[ClientSession]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {server.api_key}"})
    async with http, streamable_http_client(server.url + "/mcp", http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


SESSIONS = {"stdio": stdio_session, "streamable-http": http_session}


def text(result) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@pytest.mark.parametrize("transport", SESSIONS)
async def test_list_and_run(server, transport):
    async with SESSIONS[transport](server) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert sorted(tools) == ["close_session", "create_session", "delete_snapshot", "fork_session", "lint_python",
                                 "list_files", "list_snapshots", "list_workspace_files", "list_workspaces",
                                 "preview_session_port", "read_file", "read_workspace_file", "run_python", "snapshot_session", "write_workspace_file"]
        assert tools["run_python"].input_schema["required"] == ["code"]

        res = await session.call_tool("run_python", {"code": "print(sum(range(10)))"})
        assert not res.is_error
        assert "--- stdout ---\n45\n" in text(res)
        assert res.structured_content["status"] == "completed" and res.structured_content["stdout"] == "45\n"


@pytest.mark.parametrize("transport", SESSIONS)
async def test_exception_is_an_error_result(server, transport):
    async with SESSIONS[transport](server) as session:
        res = await session.call_tool("run_python", {"code": "def f():\n    return 1 / 0\nf()\n"})
        assert res.is_error
        assert "ZeroDivisionError" in text(res) and "Traceback" in text(res)
        assert res.structured_content["error_type"] == "ZeroDivisionError"


@pytest.mark.parametrize("transport", SESSIONS)
async def test_cancel_kills_the_run(server, transport, px):
    progress: List[str] = []
    started = anyio.Event()

    async def on_progress(value, total, message):
        progress.append(message or "")
        if message and "tick" in message:
            started.set()

    code = "import time\nprint('tick', flush=True)\nwhile True:\n    time.sleep(0.05)\n"
    async with SESSIONS[transport](server) as session:
        async with anyio.create_task_group() as tg:
            async def call():
                await session.call_tool("run_python", {"code": code}, progress_callback=on_progress)

            tg.start_soon(call)
            with anyio.fail_after(30):
                await started.wait()
            tg.cancel_scope.cancel()  # the client abandons the call: notifications/cancelled

    assert any(m == "status: running" for m in progress), progress
    # The run the call started is killed, as the API reports.
    deadline = time.monotonic() + 20
    while True:
        latest = px.list_executions(limit=1).executions[0]
        if latest.status is ExecutionStatus.KILLED:
            assert latest.stdout == "tick\n"
            return
        assert time.monotonic() < deadline, f"the run was not killed: {latest}"
        await anyio.sleep(0.1)


PLOT = """import matplotlib.pyplot as plt
plt.figure(figsize=(4, 3), dpi=50)
plt.plot([1, 3, 2])
plt.savefig("chart.png")
with open("table.csv", "w") as f:
    f.write("a,b\\n1,2\\n")
print("plotted")
"""


@pytest.mark.parametrize("transport", SESSIONS)
async def test_plot_comes_back_as_an_image(server, transport):
    server.need_tools()
    async with SESSIONS[transport](server) as session:
        res = await session.call_tool("run_python", {"code": PLOT, "requirements": ["matplotlib"]})
        if res.structured_content.get("reason") == "install_error":
            pytest.skip(f"installing from the package index failed: {text(res)}")
        assert not res.is_error, text(res)
        images = [c for c in res.content if c.type == "image"]
        assert len(images) == 1 and images[0].mime_type == "image/png"
        assert base64.b64decode(images[0].data).startswith(b"\x89PNG\r\n\x1a\n")
        assert "output 1: image/png, image 1 below" in text(res)
        out = res.structured_content
        assert out["outputs"][0]["image"] == 1 and "image/png" in out["outputs"][0]["mime_types"]
        # At least: an unchanged input file (main.py) is at times listed too.
        assert {f["path"] for f in out["files"]} >= {"chart.png", "table.csv"}

        eid = out["execution_id"]
        listed = await session.call_tool("list_files", {"execution_id": eid})
        assert not listed.is_error and " of execution " + eid in text(listed) and "\ntable.csv (8 bytes" in text(listed)
        csv = await session.call_tool("read_file", {"execution_id": eid, "path": "table.csv"})
        assert not csv.is_error and text(csv) == "a,b\n1,2\n"
        assert csv.structured_content["returned"] == "text"
        chart = await session.call_tool("read_file", {"execution_id": eid, "path": "chart.png"})
        assert [c.type for c in chart.content] == ["text", "image"]
        missing = await session.call_tool("read_file", {"execution_id": eid, "path": "nope.txt"})
        assert missing.is_error and "its files are:" in text(missing)


@pytest.mark.parametrize("transport", SESSIONS)
async def test_lint_python(server, transport):
    server.need_tools()
    async with SESSIONS[transport](server) as session:
        res = await session.call_tool("lint_python", {"code": "import os\nprint(undefined)\n", "select": ["F"]})
        assert not res.is_error, text(res)
        assert "main.py:1:8: F401" in text(res) and "main.py:2:7: F821" in text(res)
        assert res.structured_content["count"] == 2
        assert [d["code"] for d in res.structured_content["diagnostics"]] == ["F401", "F821"]
