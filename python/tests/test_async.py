"""AsyncPyExec against a live server: every method."""

from __future__ import annotations

import asyncio

import pytest

from pyexec_client import (
    AsyncPyExec,
    AuthenticationError,
    BadRequestError,
    ExecutionStatus,
    NotFoundError,
    RateLimitError,
    WaitTimeoutError,
)

SLEEPER = "import time\nprint('started', flush=True)\ntime.sleep(60)\n"


async def test_health_and_tools(apx):
    assert (await apx.health())["status"] == "ok"
    assert (await apx.tools("anthropic"))[0]["name"] == "run_python"


async def test_eval(apx):
    r = await apx.eval("print('hi')\n6 * 7")
    assert r.ok and r.stdout == "hi\n" and r.result == "42"
    r = await apx.eval("6 * 7", eval_last_expr=False)
    assert r.ok and r.result is None
    r = await apx.eval("1 / 0")
    assert r.exit_code != 0 and r.error_type == "ZeroDivisionError"
    with pytest.raises(BadRequestError, match="unsupported python_version"):
        await apx.eval("1", python_version="2.7")
    # config.secrets reaches the server (which has no network) from each call.
    for call in (apx.eval("1", secrets=["GITHUB_TOKEN"], network=False),
                 apx.run({"main.py": "1"}, secrets=["GITHUB_TOKEN"], network=False),
                 apx.submit({"main.py": "1"}, secrets=["GITHUB_TOKEN"], network=False)):
        with pytest.raises(BadRequestError, match="secrets need network"):
            await call


async def test_run_project(apx, tmp_path):
    (tmp_path / "main.py").write_text("import helper\nprint(helper.X)")
    (tmp_path / "helper.py").write_text("X = 'dir'")
    assert (await apx.run(tmp_path)).stdout == "dir\n"
    assert (await apx.run({"main.py": "import sys\nprint(sys.stdin.read())"}, stdin="in")).stdout == "in\n"


async def test_submit_events_wait_list(apx):
    exe = await apx.submit({"main.py": "print('a')\nprint('b')"})
    events = [e async for e in apx.events(exe)]
    assert events[-1].final and "".join(e.data for e in events if e.type == "stdout") == "a\nb\n"
    assert (await apx.wait(exe)).stdout == "a\nb\n"
    page = await apx.list_executions(limit=1)
    assert page.executions[0].execution_id == exe
    assert (await apx.get(exe)).status is ExecutionStatus.COMPLETED


async def test_kill(apx):
    exe = await apx.submit({"main.py": SLEEPER})
    async for ev in apx.events(exe):
        if ev.type == "stdout":
            break
    assert await apx.kill(exe) is ExecutionStatus.KILLED
    r = await apx.wait(exe, timeout=20)
    assert r.status is ExecutionStatus.KILLED and r.stdout == "started\n"


async def test_wait_timeout_and_not_found(apx):
    exe = await apx.submit({"main.py": SLEEPER})
    try:
        with pytest.raises(WaitTimeoutError):
            await apx.wait(exe, timeout=1)
    finally:
        await apx.kill(exe)
    with pytest.raises(NotFoundError):
        await apx.get("exe_00000000-0000-0000-0000-000000000000")


async def test_concurrent_calls_and_overload(apx, server):
    # Two run, two wait in the queue; the fifth is refused.
    server.wait_idle()
    submitted = await asyncio.gather(*(apx.submit({"main.py": SLEEPER}) for _ in range(4)), return_exceptions=True)
    ids = [i for i in submitted if isinstance(i, str)]
    try:
        for s in submitted:
            if isinstance(s, BaseException):
                raise s
        with pytest.raises(RateLimitError) as e:
            await apx.submit({"main.py": SLEEPER})
        assert e.value.retry_after
    finally:
        await asyncio.gather(*(apx.kill(i) for i in ids))
    finals = await asyncio.gather(*(apx.wait(i, timeout=20) for i in ids))
    assert {r.status for r in finals} == {ExecutionStatus.KILLED}


async def test_wrong_key(server):
    async with AsyncPyExec(server.url, api_key="wrong-key-wrong-key") as bad:
        with pytest.raises(AuthenticationError):
            await bad.list_executions()
