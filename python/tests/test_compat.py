"""PythonExecutorClient: the old python-executor client's documented
examples, unchanged, against pyexec."""

from __future__ import annotations

from pathlib import Path

import pytest

import python_executor_client
from pyexec_client import NotFoundError
from pyexec_client.compat import ExecutionConfig, ExecutionStatus, Metadata, PythonExecutorClient


@pytest.fixture
def client(server, monkeypatch):
    # The old client has no API key parameter; the environment supplies it.
    monkeypatch.setenv("PYEXEC_API_KEY", server.api_key)
    c = PythonExecutorClient(server.url + "/", timeout=60)
    yield c
    c.close()


def test_old_import_name():
    assert python_executor_client.PythonExecutorClient is PythonExecutorClient


def test_readme_execute_sync(client):
    result = client.execute_sync(files={"main.py": "print('Hello from Python!')"}, entrypoint="main.py")
    assert result.stdout == "Hello from Python!\n"
    assert result.exit_code == 0


def test_multi_file(client):
    result = client.execute_sync(
        files={"main.py": "from helper import greet; greet()", "helper.py": "def greet(): print('Hello from helper!')"},
        entrypoint="main.py",
    )
    assert result.stdout == "Hello from helper!\n"


def test_directory_path_and_string(client, tmp_path):
    (tmp_path / "main.py").write_text("print('dir')")
    assert client.execute_sync(files=Path(tmp_path)).stdout == "dir\n"
    assert client.execute_sync(files=str(tmp_path), entrypoint="main.py").stdout == "dir\n"


def test_kwargs_and_metadata(client):
    r = client.execute_sync(files={"app.py": "import sys\nprint(sys.stdin.read())"}, stdin="from stdin",
                            timeout_seconds=10, network_disabled=True)
    assert r.stdout == "from stdin\n"  # entrypoint detected: the only .py file
    meta = Metadata(entrypoint="main.py", env_vars=["API_KEY=secret"], script_args=["--verbose"],
                    config=ExecutionConfig(timeout_seconds=10, memory_mb=128))
    r = client.execute_sync(files={"main.py": "import os, sys\nprint(os.environ['API_KEY'], sys.argv[1:])"},
                            metadata=meta)
    assert r.stdout == "secret ['--verbose']\n"
    with pytest.raises(ValueError, match="files or tar_data"):
        client.execute_sync()


def test_async_and_wait(client):
    exec_id = client.execute_async(files={"script.py": "import time; time.sleep(1); print('Done')"},
                                   entrypoint="script.py")
    assert exec_id.startswith("exe_")
    result = client.wait_for_completion(exec_id, poll_interval=0.2)
    assert result.status == ExecutionStatus.COMPLETED and result.stdout == "Done\n"


def test_wait_with_max_wait_then_kill(client):
    exec_id = client.execute_async(files={"main.py": "import time; time.sleep(3600)"})
    with pytest.raises(TimeoutError):
        client.wait_for_completion(exec_id, poll_interval=0.2, max_wait=1.0)
    assert client.kill(exec_id) is None
    assert client.wait_for_completion(exec_id, poll_interval=0.2, max_wait=20).status == ExecutionStatus.KILLED


def test_get_execution(client):
    exec_id = client.execute_async(files={"main.py": "print(1)"})
    client.wait_for_completion(exec_id, poll_interval=0.2)
    assert client.get_execution(exec_id).stdout == "1\n"
    with pytest.raises(NotFoundError):
        client.get_execution("exe_00000000-0000-0000-0000-000000000000")


@pytest.mark.parametrize("code,want", [
    ("2 + 2", "4"),
    ("x = 5\ny = 10\nx + y", "15"),
    ("x = 10\ny = 5\nx * y", "50"),
    ("import math\nmath.sqrt(16)", "4.0"),
    ("[x**2 for x in range(5)]", "[0, 1, 4, 9, 16]"),
])
def test_eval_examples(client, code, want):
    result = client.eval(code)
    assert result.exit_code == 0 and result.result == want


def test_eval_print_has_no_result(client):
    result = client.eval('print("Hello from eval!")')
    assert result.stdout == "Hello from eval!\n" and result.result is None


def test_eval_python_version_and_options(client):
    assert client.eval("import sys; sys.version_info[:2]", python_version="3.11").result == "(3, 11)"
    assert client.eval("1 + 1", eval_last_expr=False).result is None
    r = client.eval("", files=[{"name": "a.py", "content": "print(input())"}], stdin="typed", timeout_seconds=5)
    assert r.stdout == "typed\n"


def test_execute_sync_has_no_result(client):
    result = client.execute_sync(files={"main.py": "print('Hello, World!')"}, entrypoint="main.py")
    assert result.stdout == "Hello, World!\n" and result.result is None
