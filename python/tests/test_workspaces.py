"""Workspaces against a live server, sync and async: files put through the
API are read by runs and sessions, what a run writes comes back through
the API, versions are kept and restorable."""

from __future__ import annotations

import io
import tarfile
import uuid

import pytest

from pyexec_client import APIError, BadRequestError, NotFoundError, PyExec


def fresh_workspace(px: PyExec) -> str:
    """A new workspace; the test is skipped on a server whose jails cannot
    mount workspaces (501, with the reason)."""
    name = "py-" + uuid.uuid4().hex[:12]
    try:
        ws = px.create_workspace(name, quota_mb=16)
    except APIError as e:
        if e.status_code == 501:
            pytest.skip(f"this server cannot mount workspaces: {e}")
        raise
    assert (ws["name"], ws["version"], ws["quota_bytes"]) == (name, 0, 16 << 20)
    return name


def tar_names(data: bytes) -> dict:
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        return {m.name: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}


def test_workspace_files_runs_and_versions(px: PyExec):
    name = fresh_workspace(px)
    c = px.upload_workspace(name, {"data/in.csv": "a,b\n1,2\n", "README": "notes"}, dir="proj")
    assert (c["version"], c["changed"], c["added"]) == (1, True, 4)  # two files and their two folders
    c = px.write_workspace_file(name, "proj/data/extra.txt", "extra")
    assert c["version"] == 2
    paths = [f["path"] for f in px.workspace_files(name, "proj/data")]
    assert paths == ["proj/data/extra.txt", "proj/data/in.csv"]
    assert px.read_workspace_file(name, "proj/data/in.csv") == b"a,b\n1,2\n"

    r = px.eval("print(open('/workspace/proj/data/in.csv').read().split()[1])\n"
                "open('/workspace/proj/out.txt', 'w').write('from the run')", workspace=name)
    assert r.ok and r.stdout == "1,2\n"
    assert r.workspace["name"] == name and r.workspace["version"] == 3 and r.workspace["added"] == 1
    assert px.read_workspace_file(name, "proj/out.txt") == b"from the run"
    assert px.get_workspace(name)["version"] == 3

    r = px.run({"main.py": "open('/workspace/proj/out.txt', 'w').write('no')"}, workspace=name, workspace_mode="ro")
    assert r.exit_code != 0 and "Read-only file system" in r.stderr
    assert px.read_workspace_file(name, "proj/out.txt") == b"from the run"

    assert tar_names(px.download_workspace(name, "proj")) == {
        "README": b"notes", "data/in.csv": b"a,b\n1,2\n", "data/extra.txt": b"extra", "out.txt": b"from the run"}

    c = px.remove_workspace_file(name, "proj/data")
    assert c["deleted"] >= 2
    with pytest.raises(NotFoundError):
        px.read_workspace_file(name, "proj/data/in.csv")
    assert px.read_workspace_file(name, "proj/data/in.csv", version=3) == b"a,b\n1,2\n"
    sources = [v["source"] for v in px.workspace_versions(name)]
    assert sources[0] == "create" and sources[1] == "upload" and len(sources) == 5
    c = px.restore_workspace(name, 3)
    assert c["version"] == 5 and px.read_workspace_file(name, "proj/data/in.csv") == b"a,b\n1,2\n"

    with pytest.raises(ValueError):
        px.eval("1", workspace_mode="ro")  # refused here, before any request
    assert name in [w["name"] for w in px.list_workspaces()]
    px.delete_workspace(name)
    with pytest.raises(NotFoundError):
        px.get_workspace(name)
    with pytest.raises(NotFoundError):
        px.eval("1", workspace=name)


def test_session_with_a_workspace(px: PyExec):
    name = fresh_workspace(px)
    px.write_workspace_file(name, "state.txt", "1")
    with px.session(memory_mb=64, workspace=name) as s:
        r = s.execute("n = int(open('/workspace/state.txt').read())\nopen('/workspace/state.txt', 'w').write(str(n + 1))\nn")
        assert r.result == "1"
    # the session's changes are committed when it ends
    assert px.read_workspace_file(name, "state.txt") == b"2"
    px.delete_workspace(name)


async def test_async_workspaces(apx, px: PyExec):
    name = fresh_workspace(px)
    c = await apx.write_workspace_file(name, "a/b.txt", b"bytes\x00here")
    assert c["version"] == 1
    assert await apx.read_workspace_file(name, "a/b.txt") == b"bytes\x00here"
    r = await apx.eval("print(len(open('/workspace/a/b.txt', 'rb').read()))", workspace=name, workspace_mode="ro")
    assert r.stdout == "10\n" and r.workspace["mode"] == "ro" and r.workspace["changed"] is False
    c = await apx.upload_workspace(name, {"c.txt": "c"})
    assert [f["path"] for f in await apx.workspace_files(name)] == ["a", "a/b.txt", "c.txt"]
    assert len(await apx.workspace_versions(name)) == 3
    assert tar_names(await apx.download_workspace(name)) == {"a/b.txt": b"bytes\x00here", "c.txt": b"c"}
    await apx.remove_workspace_file(name, "c.txt")
    assert (await apx.restore_workspace(name, 2))["version"] == 4
    assert await apx.read_workspace_file(name, "c.txt") == b"c"
    assert name in [w["name"] for w in await apx.list_workspaces()]
    await apx.delete_workspace(name)
    with pytest.raises(NotFoundError):
        await apx.get_workspace(name)


def test_operator_options_on_the_lists(px: PyExec):
    """owner and all reach the server: naming the key's own name (pytest,
    the launcher's key) lists the workspace, another owner is not found
    for a key that is no operator's, and all=True is refused to such a key
    (its own list is the plain call)."""
    name = fresh_workspace(px)
    px.write_workspace_file(name, "a.txt", "a")
    assert [f["path"] for f in px.workspace_files(name, owner="pytest")] == ["a.txt"]
    with pytest.raises(NotFoundError):
        px.workspace_files(name, owner="someone-else")
    with pytest.raises(BadRequestError, match="needs an operator key"):
        px.list_workspaces(all=True)
    listed = px.list_workspaces()
    assert name in [w["name"] for w in listed] and {w["owner"] for w in listed} == {"pytest"}
