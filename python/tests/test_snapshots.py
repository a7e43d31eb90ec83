"""Snapshots and forks of sessions against a live server, sync and async,
from the client and from the tool-call helpers."""

from __future__ import annotations

import pytest

from pyexec_client import CellResult, NotFoundError, PyExec, SnapshotInfo, SnapshotSaved
from pyexec_client.tools import arun_tool, run_tool


def test_snapshot_restore_fork_list_delete(px: PyExec):
    with px.session(memory_mb=64) as s:
        s.execute("import threading\ndata = {'answer': 42}\nlock = threading.Lock()\nopen('notes.txt', 'w').write('kept')")
        snap = s.snapshot()
        assert isinstance(snap, SnapshotSaved) and snap.snapshot_id.startswith("snap_") and snap.bytes > 0
        assert snap.execution_count == 1 and "data" in snap.saved
        assert [x.name for x in snap.skipped] == ["lock"]

        with s.fork() as child:
            assert child.id != s.id and child.info()["forked_from"] == s.id
            child.execute("data['answer'] = 0")
            assert s.execute("data['answer']").result == "42"
            assert child.execute("data['answer']").result == "0"

    with px.session(from_snapshot=snap.snapshot_id) as restored:
        assert restored.info()["from_snapshot"] == snap.snapshot_id
        r = restored.execute("data, open('notes.txt').read(), 'lock' in globals()")
        assert r.result == "({'answer': 42}, 'kept', False)" and r.execution_count == 2 and not r.resumed

    listed = [x for x in px.list_snapshots() if x.snapshot_id == snap.snapshot_id]
    assert len(listed) == 1 and isinstance(listed[0], SnapshotInfo)
    assert (listed[0].session_id, listed[0].bytes, listed[0].created_at is not None) == (s.id, snap.bytes, True)
    px.delete_snapshot(snap.snapshot_id)
    assert snap.snapshot_id not in [x.snapshot_id for x in px.list_snapshots()]
    with pytest.raises(NotFoundError):
        px.delete_snapshot(snap.snapshot_id)
    with pytest.raises(NotFoundError):
        px.session(from_snapshot=snap.snapshot_id)


async def test_async_snapshot_and_fork(apx):
    async with apx.session(memory_mb=64) as s:
        await s.execute("x = 20")
        snap = await s.snapshot()
        async with await s.fork() as child:
            await child.execute("x += 1")
            assert (await s.execute("x")).result == "20"
            assert (await child.execute("x * 2")).result == "42"
    async with apx.session(from_snapshot=snap.snapshot_id) as restored:
        assert (await restored.execute("x + 22")).result == "42"
    assert snap.snapshot_id in [x.snapshot_id for x in await apx.list_snapshots()]
    await apx.delete_snapshot(snap.snapshot_id)
    assert snap.snapshot_id not in [x.snapshot_id for x in await apx.list_snapshots()]


def test_snapshot_tools(px: PyExec):
    sid = run_tool(px, "create_session", {}).text.split()[1]
    assert not run_tool(px, "run_python", {"code": "x = 6", "session_id": sid}).is_error
    saved = run_tool(px, "snapshot_session", {"session_id": sid})
    assert not saved.is_error and f"session {sid} saved as snapshot snap_" in saved.text
    snap = saved.text.split()[5]
    forked = run_tool(px, "fork_session", {"session_id": sid})
    assert not forked.is_error and forked.text.endswith(f"forked from {sid}\n")
    child = forked.text.split()[1]
    assert "value: 42" in run_tool(px, "run_python", {"code": "x * 7", "session_id": child}).text
    restored = run_tool(px, "create_session", {"from_snapshot": snap})
    assert not restored.is_error
    rid = restored.text.split()[1]
    assert "value: 36" in run_tool(px, "run_python", {"code": "x * x", "session_id": rid}).text
    assert snap in run_tool(px, "list_snapshots", {}).text
    assert not run_tool(px, "delete_snapshot", {"snapshot_id": snap}).is_error
    gone = run_tool(px, "delete_snapshot", {"snapshot_id": snap})
    assert gone.is_error and "not found" in gone.text
    for s in (sid, child, rid):
        assert not run_tool(px, "close_session", {"session_id": s}).is_error


async def test_async_snapshot_tools(apx):
    sid = (await arun_tool(apx, "create_session", {})).text.split()[1]
    saved = await arun_tool(apx, "snapshot_session", {"session_id": sid})
    snap = saved.text.split()[5]
    assert not saved.is_error and snap in (await arun_tool(apx, "list_snapshots", {})).text
    child = (await arun_tool(apx, "fork_session", {"session_id": sid})).text.split()[1]
    assert not (await arun_tool(apx, "delete_snapshot", {"snapshot_id": snap})).is_error
    for s in (sid, child):
        assert not (await arun_tool(apx, "close_session", {"session_id": s})).is_error


def test_cell_result_says_resumed():
    r = CellResult.from_dict({"execution_id": "exe_1", "status": "completed", "exit_code": 0, "session_id": "ses_1", "execution_count": 3,
                              "resumed": True})
    assert r.resumed and r.execution_count == 3
    assert not CellResult.from_dict({"execution_id": "exe_1", "status": "completed", "exit_code": 0}).resumed


def test_snapshot_answers_decode():
    s = SnapshotSaved.from_dict({"snapshot_id": "snap_1", "bytes": 10, "execution_count": 2, "saved": ["a"],
                                 "skipped": [{"name": "t", "reason": "a thread"}]})
    assert (s.saved, s.skipped[0].name, s.skipped[0].reason) == (("a",), "t", "a thread")
    i = SnapshotInfo.from_dict({"snapshot_id": "snap_1", "session_id": "ses_1", "bytes": 10,
                                "created_at": "2026-01-02T03:04:05Z", "skipped": None})
    assert i.created_at is not None and i.created_at.year == 2026 and i.skipped == ()
