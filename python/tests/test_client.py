"""PyExec against a live server: every method."""

from __future__ import annotations

import threading
import time

import pytest

from pyexec_client import (
    AuthenticationError,
    BadRequestError,
    ExecutionStatus,
    NotFoundError,
    PayloadTooLargeError,
    PyExec,
    RateLimitError,
    TransportError,
    WaitTimeoutError,
    tar_from_dict,
)

SLEEPER = "import time\nprint('started', flush=True)\ntime.sleep(60)\n"


def test_health(px):
    assert px.health()["status"] == "ok"


class TestEval:
    def test_last_expression_and_stdout(self, px):
        r = px.eval("print('hi')\n6 * 7")
        assert r.ok and r.stdout == "hi\n" and r.result == "42"
        r = px.eval("print('hi')\n6 * 7", eval_last_expr=False)
        assert r.ok and r.stdout == "hi\n" and r.result is None
        assert r.execution_id.startswith("exe_") and r.started_at and r.finished_at

    def test_exception_is_a_result(self, px):
        r = px.eval("x = 1\nundefined_name\n")
        assert r.status is ExecutionStatus.COMPLETED and r.exit_code != 0 and not r.ok
        assert r.error_type == "NameError" and r.error_line == 2 and "Traceback" in r.stderr

    def test_files_stdin_and_version(self, px):
        r = px.eval(files={"main.py": "import helper, sys\nprint(helper.up(sys.stdin.read()), sys.version_info[:2])",
                           "helper.py": "def up(s): return s.upper()"},
                    stdin="abc", python_version="3.12")
        assert r.ok and r.stdout == "ABC (3, 12)\n" and r.python_version.startswith("3.12")

    def test_timeout_keeps_partial_output(self, px):
        r = px.eval("import time\nprint('before', flush=True)\ntime.sleep(30)", timeout_seconds=1)
        assert r.status is ExecutionStatus.FAILED and r.reason == "timeout" and r.timed_out
        assert r.stdout == "before\n" and "timeout" in r.error

    def test_unknown_version_is_bad_request(self, px):
        with pytest.raises(BadRequestError, match=r'unsupported python_version "2\.7"') as e:
            px.eval("1", python_version="2.7")
        assert e.value.status_code == 400

    def test_secrets_reach_the_server(self, px):
        # The test server has no network: secrets with network off are refused
        # by the engine's check of config.secrets, naming them; without a
        # network argument they ask for network, which this server refuses.
        for call in (lambda **kw: px.eval("1", **kw), lambda **kw: px.run({"main.py": "1"}, **kw),
                     lambda **kw: px.submit({"main.py": "1"}, **kw)):
            with pytest.raises(BadRequestError, match="secrets need network"):
                call(secrets=["GITHUB_TOKEN"], network=False)
            with pytest.raises(BadRequestError, match="network access is disabled"):
                call(secrets=["GITHUB_TOKEN"])
        with pytest.raises(TypeError, match="list of names"):
            px.eval("1", secrets="GITHUB_TOKEN")

    def test_code_over_the_limit(self, px):
        with pytest.raises(PayloadTooLargeError, match="exceeds limit"):
            px.eval("#" * (100 * 1024 + 1))


class TestProjects:
    def test_run_dict_with_env_and_args(self, px):
        r = px.run({"main.py": "import os, sys\nprint(os.environ['GREETING'], sys.argv[1:])"},
                   env={"GREETING": "hello"}, args=["a", "b"])
        assert r.ok and r.stdout == "hello ['a', 'b']\n"

    def test_run_directory_detects_the_entrypoint(self, px, tmp_path):
        (tmp_path / "__main__.py").write_text("from pkg import mod\nprint(mod.VALUE)")
        (tmp_path / "pkg").mkdir()
        (tmp_path / "pkg" / "__init__.py").write_text("")
        (tmp_path / "pkg" / "mod.py").write_text("VALUE = 'from a package'")
        r = px.run(tmp_path)
        assert r.ok and r.stdout == "from a package\n"

    def test_run_file_and_tar(self, px, tmp_path):
        script = tmp_path / "job.py"
        script.write_text("print('single file')")
        assert px.run(script).stdout == "single file\n"
        tar = tar_from_dict({"x.py": "print('tar')"})
        assert px.run(tar, entrypoint="x.py", python_version="3.12").stdout == "tar\n"


class TestAsync:
    def test_submit_events_wait(self, px):
        exe = px.submit({"main.py": "for i in range(3):\n    print(i, flush=True)"})
        events = list(px.events(exe))
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert "".join(e.data for e in events if e.type == "stdout") == "0\n1\n2\n"
        assert events[-1].final and events[-1].data == "completed"
        assert px.wait(exe).stdout == "0\n1\n2\n"
        assert [e.seq for e in px.events(exe, after=2)][0] == 3

    def test_kill_a_running_execution(self, px):
        exe = px.submit({"main.py": SLEEPER})
        for ev in px.events(exe):
            if ev.type == "stdout" and "started" in ev.data:
                break
        assert px.kill(exe) is ExecutionStatus.KILLED
        r = px.wait(exe, timeout=20)
        assert r.status is ExecutionStatus.KILLED and r.stdout == "started\n"
        assert px.kill(exe) is ExecutionStatus.KILLED  # already over: says so

    def test_wait_timeout(self, px):
        exe = px.submit({"main.py": SLEEPER})
        try:
            with pytest.raises(WaitTimeoutError):
                px.wait(exe, timeout=1)
        finally:
            px.kill(exe)

    def test_get_unknown(self, px):
        with pytest.raises(NotFoundError, match="execution not found"):
            px.get("exe_00000000-0000-0000-0000-000000000000")

    def test_list_executions_pages(self, px):
        ids = [px.submit({"main.py": f"print({i})"}) for i in range(3)]
        for i in ids:
            px.wait(i)
        first = px.list_executions(limit=2)
        assert len(first.executions) == 2 and first.next_cursor
        second = px.list_executions(limit=2, cursor=first.next_cursor)
        seen = [e.execution_id for e in first.executions + second.executions]
        assert seen[:3] == ids[::-1]
        assert all(e.status is ExecutionStatus.COMPLETED for e in px.list_executions(status="completed").executions)

    def test_overload_is_rate_limited_with_retry_after(self, px, server):
        # Two run, two wait in the queue; the fifth is refused.
        server.wait_idle()
        ids = []
        try:
            for _ in range(4):
                ids.append(px.submit({"main.py": SLEEPER}))
            with pytest.raises(RateLimitError) as e:
                px.submit({"main.py": SLEEPER})
            assert e.value.status_code == 429 and e.value.retry_after and e.value.retry_after > 0
        finally:
            for i in ids:
                px.kill(i)
        for i in ids:
            assert px.wait(i, timeout=20).status is ExecutionStatus.KILLED


class TestService:
    def test_tools(self, px):
        openai = px.tools()
        assert openai[0]["type"] == "function" and openai[0]["function"]["name"] == "run_python"
        anthropic = px.tools("anthropic")
        assert anthropic[0]["name"] == "run_python" and "code" in anthropic[0]["input_schema"]["properties"]
        with pytest.raises(BadRequestError):
            px.tools("gemini")

    def test_wrong_key(self, server):
        with PyExec(server.url, api_key="wrong-key-wrong-key") as bad:
            with pytest.raises(AuthenticationError, match="invalid API key"):
                bad.eval("1")

    def test_unreachable(self):
        with PyExec("http://127.0.0.1:9", timeout=2) as nowhere:
            with pytest.raises(TransportError):
                nowhere.health()


def test_events_stream_live(px):
    exe = px.submit({"main.py": "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.3)"})
    arrivals = []
    start = time.monotonic()
    for ev in px.events(exe):
        if ev.type == "stdout":
            arrivals.append(time.monotonic() - start)
    # Output arrives as it is written, not all at the end.
    assert len(arrivals) >= 2 and arrivals[-1] - arrivals[0] > 0.3


def test_client_is_thread_safe(px):
    results = []

    def work(i):
        results.append(px.eval(f"{i} * 2").result)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["0", "2"]
