"""Tests that need no server: archives, decoding, errors, rendering."""

from __future__ import annotations

import asyncio
import io
import os
import tarfile
from datetime import datetime, timezone

import httpx
import pytest

from pyexec_client import (
    AsyncPyExec,
    AuthenticationError,
    BadRequestError,
    ExecutionResult,
    ExecutionStatus,
    NotFoundError,
    PyExec,
    RateLimitError,
    ServerError,
    detect_entrypoint,
    tar_from_dict,
    tar_from_directory,
    tar_from_project,
)
from pyexec_client._common import SSEDecoder, api_error, config, eval_body, retry_after
from pyexec_client.sessions import CreateStreamDecoder, create_body, requirements_text
from pyexec_client.tools import render_result, run_tool
from pyexec_client.types import parse_time


def members(data: bytes) -> dict:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


class TestTar:
    def test_from_dict_text_and_bytes(self):
        assert members(tar_from_dict({"main.py": "print(1)", "pkg/data.bin": b"\x00\x01"})) == {
            "main.py": b"print(1)", "pkg/data.bin": b"\x00\x01"}

    @pytest.mark.parametrize("name", ["/etc/passwd", "../x.py", "a/../../x.py", ""])
    def test_unsafe_names_are_refused(self, name):
        with pytest.raises(ValueError, match="unsafe file name"):
            tar_from_dict({name: "x"})

    def test_directory_skips_caches_and_links(self, tmp_path):
        (tmp_path / "main.py").write_text("import util")
        (tmp_path / "lib").mkdir()
        (tmp_path / "lib" / "util.py").write_text("X = 1")
        (tmp_path / "__pycache__").mkdir()
        (tmp_path / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"junk")
        os.symlink("/etc/passwd", tmp_path / "link.py")
        assert set(members(tar_from_directory(tmp_path))) == {"main.py", "lib/util.py"}

    def test_project_forms(self, tmp_path):
        f = tmp_path / "script.py"
        f.write_text("print(2)")
        assert members(tar_from_project(f)) == {"script.py": b"print(2)"}
        assert members(tar_from_project(str(tmp_path))) == {"script.py": b"print(2)"}
        raw = tar_from_dict({"a.py": "1"})
        assert tar_from_project(raw) == raw
        with pytest.raises(ValueError, match="does not exist"):
            tar_from_project(tmp_path / "missing")

    @pytest.mark.parametrize("names,want", [
        (["b.py", "main.py", "__main__.py"], "main.py"),
        (["b.py", "__main__.py"], "__main__.py"),
        (["z.py", "a.py", "data.txt"], "a.py"),
    ])
    def test_detect_entrypoint(self, names, want):
        assert detect_entrypoint(names) == want

    def test_detect_entrypoint_without_python(self):
        with pytest.raises(ValueError, match="no Python file"):
            detect_entrypoint(["data.txt"])


class TestDecoding:
    def test_sse_frames(self):
        dec = SSEDecoder()
        lines = [": heartbeat", "", "id: 1", "event: status", 'data: {"seq":1,"type":"status","data":"running",'
                 '"time":"2026-01-02T03:04:05.123456Z"}', "", "id: 2", "event: stdout", 'data: {"data":"hi\\n"}', ""]
        events = [e for e in (dec.feed(line) for line in lines) if e is not None]
        assert [(e.seq, e.type, e.data) for e in events] == [(1, "status", "running"), (2, "stdout", "hi\n")]
        assert events[0].time == datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)
        assert not events[0].final

    def test_session_create_stream(self):
        lines = []
        dec = CreateStreamDecoder(lines.append)
        frames = ["event: install", 'data: {"type":"install","data":"Resolved 1 package"}', "", ": keep-alive", "",
                  "event: session", 'data: {"session_id":"ses_1","state":"idle"}', ""]
        ids = [x for x in (dec.feed(line) for line in frames) if x]
        assert ids == ["ses_1"] and lines == ["Resolved 1 package"]

    def test_session_create_stream_error(self):
        dec = CreateStreamDecoder(lambda _: None)
        for line in ["event: error", 'data: {"error":"install_error: installing nope failed","status":400}']:
            assert dec.feed(line) is None
        with pytest.raises(BadRequestError, match="install_error: installing nope failed"):
            dec.feed("")

    def test_session_requirements(self):
        assert requirements_text(["polars", " numpy<2 "]) == "polars\nnumpy<2\n"
        assert requirements_text("six\n") == "six\n" and requirements_text([]) is None
        assert create_body(None, ["six"], None, None, None, None, None, None, None) == {"requirements": "six\n"}
        with pytest.raises(ValueError):
            requirements_text(["six\npandas"])

    def test_final_event(self):
        dec = SSEDecoder()
        for line in ["event: status", 'data: {"seq":3,"type":"status","data":"killed"}']:
            assert dec.feed(line) is None
        assert dec.feed("").final

    def test_result_from_dict(self):
        r = ExecutionResult.from_dict({"execution_id": "exe_1", "status": "completed", "exit_code": 1,
                                       "stderr": "Traceback", "error_type": "NameError", "error_line": 2,
                                       "started_at": "2026-01-02T03:04:05Z", "new_field": 1})
        assert r.status is ExecutionStatus.COMPLETED and str(r.status) == "completed"
        assert (r.exit_code, r.error_type, r.error_line, r.stdout) == (1, "NameError", 2, "")
        assert r.done and not r.ok and r.raw["new_field"] == 1
        assert r.started_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)

    def test_parse_time_offsets(self):
        assert parse_time("2026-01-02T03:04:05.5+02:00").utcoffset().total_seconds() == 7200
        assert parse_time(None) is None


class TestRequests:
    def test_config_sends_network_explicitly(self):
        assert config(None, None, None, None, None) is None
        assert config(5, None, None, None, False) == {"timeout_seconds": 5, "network_disabled": True}
        assert config(None, 64, None, None, True) == {"memory_mb": 64, "network_disabled": False}
        assert config(None, None, None, None, ["pypi.org:443"]) == {
            "network_disabled": False, "network": {"allow": ["pypi.org:443"]}}

    def test_config_sends_secrets(self):
        assert config(None, None, None, None, None, ["GITHUB_TOKEN"]) == {
            "network_disabled": False, "secrets": ["GITHUB_TOKEN"]}
        assert config(None, None, None, None, False, ("A", "B")) == {"network_disabled": True, "secrets": ["A", "B"]}
        assert config(None, None, None, None, ["api.github.com:443"], ["A"]) == {
            "network_disabled": False, "network": {"allow": ["api.github.com:443"]}, "secrets": ["A"]}

    def test_workspace_lists_send_the_operator_options(self):
        seen = []

        def answer(req: httpx.Request) -> httpx.Response:
            seen.append(req.url.path + ("?" + req.url.query.decode() if req.url.query else ""))
            return httpx.Response(200, json={"files": []} if req.url.path.endswith("/files") else {"workspaces": []})

        with PyExec("http://pyexec.test", http_client=httpx.Client(transport=httpx.MockTransport(answer))) as px:
            px.list_workspaces(all=True)
            px.list_workspaces()
            px.workspace_files("proj", "data", owner="team-b")
            px.workspace_files("proj")

        async def async_calls():
            async with AsyncPyExec("http://pyexec.test",
                                   http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer))) as apx:
                await apx.list_workspaces(all=True)
                await apx.workspace_files("proj", owner="team-b", version=2)

        asyncio.run(async_calls())
        assert seen == ["/api/v1/workspaces?all=true", "/api/v1/workspaces",
                        "/api/v1/workspaces/proj/files?dir=data&owner=team-b", "/api/v1/workspaces/proj/files",
                        "/api/v1/workspaces?all=true", "/api/v1/workspaces/proj/files?version=2&owner=team-b"]

    def test_session_network_and_secrets(self):
        assert create_body(None, None, None, None, None, None, ["allowed.test"], None, None, secrets=["GITHUB_TOKEN"]) == {
            "network_disabled": False, "network": {"allow": ["allowed.test"]}, "secrets": ["GITHUB_TOKEN"]}
        assert create_body(None, None, None, None, None, None, None, None, None, secrets=["A"]) == {
            "network_disabled": False, "secrets": ["A"]}
        assert create_body(None, None, None, None, None, None, True, None, None) == {"network_disabled": False}
        assert create_body(None, None, None, None, None, None, None, None, None) == {}

    def test_eval_body(self):
        assert eval_body("1", None, None, None, None, None, True, None) == {"code": "1", "eval_last_expr": True}
        assert eval_body(None, {"a.py": "x"}, "a.py", "in", "3.12", None, False, "-") == {
            "files": [{"name": "a.py", "content": "x"}], "entrypoint": "a.py", "stdin": "in",
            "python_version": "3.12", "requirements_txt": "-"}
        with pytest.raises(ValueError):
            eval_body(None, None, None, None, None, None, False, None)


class TestErrors:
    @pytest.mark.parametrize("status,cls", [(400, BadRequestError), (401, AuthenticationError), (404, NotFoundError),
                                            (429, RateLimitError), (500, ServerError), (502, ServerError)])
    def test_status_classes_carry_the_message(self, status, cls):
        e = api_error(status, b'{"error":"execution not found"}', None, "reason")
        assert type(e) is cls and e.message == "execution not found" and e.status_code == status
        assert str(e) == f"execution not found (HTTP {status})"

    def test_retry_after(self):
        e = api_error(429, b'{"error":"busy"}', "3", "")
        assert e.retry_after == 3.0
        assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
        assert retry_after("soon") is None

    def test_non_json_body(self):
        assert api_error(502, b"bad gateway from proxy", None, "Bad Gateway").message == "bad gateway from proxy"
        assert api_error(502, b"<html>", None, "Bad Gateway").message == "Bad Gateway"


class TestToolText:
    def test_render_like_the_mcp_server(self):
        r = ExecutionResult.from_dict({"execution_id": "e", "status": "completed", "exit_code": 1, "duration_ms": 9,
                                       "stdout": "hi\n", "stderr": "Traceback\n", "error_type": "NameError",
                                       "error": "name 'x' is not defined", "error_line": 2})
        assert render_result(r) == ("status: completed, exit code 1, 9 ms\n"
                                    "error: NameError: name 'x' is not defined (line 2)\n"
                                    "--- stdout ---\nhi\n--- stderr ---\nTraceback\n")
        empty = ExecutionResult.from_dict({"execution_id": "e", "status": "completed"})
        assert render_result(empty) == "status: completed, exit code 0\n(no output)\n"
        assert empty.node is None
        assert ExecutionResult.from_dict({"execution_id": "e", "status": "running", "node": "b"}).node == "b"

    @pytest.mark.parametrize("name,args,want", [
        ("run_ruby", {"code": "1"}, "unknown tool 'run_ruby'"),
        ("run_python", "{not json", "not valid JSON"),
        ("run_python", {"stdin": "x"}, "code is required"),
        ("run_python", {"code": "1", "python_version": "latest"}, "not MAJOR.MINOR"),
        ("run_python", {"code": "1", "files": [{"path": "main.py", "content": ""}]}, "given twice"),
        ("run_python", {"code": "1", "timeout_seconds": 0}, "positive integer"),
        ("snapshot_session", {}, "session_id is required"),
        ("fork_session", {"session_id": 7}, "session_id is required"),
        ("delete_snapshot", {}, "snapshot_id is required"),
        ("create_session", {"from_snapshot": ""}, "from_snapshot must be"),
    ])
    def test_bad_calls_are_error_outcomes(self, name, args, want):
        out = run_tool(None, name, args)  # refused before any request
        assert out.is_error and want in out.text
