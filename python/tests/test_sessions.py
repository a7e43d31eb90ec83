"""Sessions against a live server, sync and async."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from pyexec_client import BadRequestError, CellResult, NotFoundError, PyExec


def wait_busy(session, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while session.info()["state"] != "busy":
        if time.monotonic() > deadline:
            raise AssertionError("the session never became busy")
        time.sleep(0.02)
    time.sleep(0.2)


def test_state_persists_and_errors_point_at_the_cell(px: PyExec):
    with px.session(memory_mb=64) as s:
        assert s.execute("x = 1").ok
        assert s.execute("x += 1\nx").result == "2"
        r = s.execute("x * 10")
        assert isinstance(r, CellResult) and r.result == "20" and r.execution_count == 3
        r = s.execute("a = 1\nb = 2\nundefined_name")
        assert (r.exit_code, r.error_type, r.error_line) == (1, "NameError", 3)
        assert 'File "<cell-4>", line 3' in r.stderr
        assert s.id in [x["session_id"] for x in px.list_sessions()]
    with pytest.raises(NotFoundError):
        s.info()


def test_requirements_with_install_progress(px: PyExec, server):
    server.need_tools()
    lines = []
    try:
        s = px.session(requirements=["six"], on_install=lines.append)
    except BadRequestError as e:
        pytest.skip(f"installing six from the package index failed: {e}")
    with s:
        assert s.execute("import six\nsix.__name__").result == "'six'"
    with pytest.raises(BadRequestError, match="install_error: .*no-such-dist-pyexec-test"):
        px.session(requirements=["no-such-dist-pyexec-test"], on_install=lines.append)


def test_interrupt_keeps_variables(px: PyExec):
    with px.session(memory_mb=64) as s:
        s.execute("x = 41")
        out = {}
        t = threading.Thread(target=lambda: out.update(r=s.execute("while True: pass")))
        t.start()
        wait_busy(s)
        s.interrupt()
        t.join(timeout=20)
        assert out["r"].error_type == "KeyboardInterrupt"
        assert s.execute("x + 1").result == "42"


def test_restart_clears_variables_and_keeps_files(px: PyExec):
    with px.session(memory_mb=64) as s:
        s.upload("data/in.bin", b"\x00\x01\xff")
        s.execute("x = 1\nopen('made.txt', 'w').write('kept')")
        assert {f["path"] for f in s.files()} == {"data/in.bin", "made.txt"}
        assert s.restart()["execution_count"] == 0
        r = s.execute("'x' in globals(), open('made.txt').read(), open('data/in.bin', 'rb').read()")
        assert r.result == "(False, 'kept', b'\\x00\\x01\\xff')"
        assert s.download("made.txt") == b"kept"


async def test_async_session(apx):
    async with apx.session(memory_mb=64) as s:
        await s.execute("import math\nr = 3")
        r = await s.execute("round(math.pi * r ** 2, 2)")
        assert r.result == "28.27" and r.execution_count == 2
        await s.upload("a.txt", b"hello")
        assert await s.download("a.txt") == b"hello"
        task = asyncio.ensure_future(s.execute("while True: pass"))
        while (await s.info())["state"] != "busy":
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        await s.interrupt()
        assert (await task).error_type == "KeyboardInterrupt"
    assert s.id not in [x["session_id"] for x in await apx.list_sessions()]
