"""The tool-call helpers against a live server, with calls shaped as the
OpenAI and Anthropic SDKs produce them (dicts and objects)."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace

import pytest

from pyexec_client import APIError
from pyexec_client.tools import (
    LINT_PYTHON,
    LIST_FILES,
    LIST_WORKSPACE_FILES,
    LIST_WORKSPACES,
    READ_FILE,
    READ_WORKSPACE_FILE,
    WRITE_WORKSPACE_FILE,
    RUN_PYTHON,
    TOOLS,
    aanthropic_tool_result,
    anthropic_tool_result,
    aopenai_response_output,
    aopenai_tool_message,
    openai_response_output,
    openai_tool_message,
    arun_tool,
    run_tool,
)


def openai_call(args, as_object=False):
    call = {"id": "call_1", "type": "function", "function": {"name": RUN_PYTHON, "arguments": json.dumps(args)}}
    if as_object:
        return SimpleNamespace(id="call_1", type="function",
                               function=SimpleNamespace(name=RUN_PYTHON, arguments=json.dumps(args)))
    return call


def test_definitions_match_the_helper(px):
    tools = {t["function"]["name"]: t["function"] for t in px.tools("openai")}
    assert set(tools) == set(TOOLS)
    params = tools[RUN_PYTHON]["parameters"]
    assert params["required"] == ["code"]
    assert set(params["properties"]) == {"code", "files", "python_version", "timeout_seconds", "network",
                                         "network_allow", "secrets", "stdin", "requirements", "session_id",
                                         "workspace", "workspace_read_only"}
    assert set(tools[LINT_PYTHON]["parameters"]["properties"]) == {"code", "files", "profile", "select", "ignore"}
    assert set(tools[READ_FILE]["parameters"]["properties"]) == {"execution_id", "path", "offset", "max_bytes"}
    assert {t["name"] for t in px.tools("anthropic")} == set(TOOLS)


def test_session_tools(px):
    created = run_tool(px, "create_session", {})
    assert not created.is_error and created.text.startswith("session ses_")
    sid = created.text.split()[1]
    assert not run_tool(px, RUN_PYTHON, {"code": "x = 6", "session_id": sid}).is_error
    out = run_tool(px, RUN_PYTHON, {"code": "x * int(open('n.txt').read())", "session_id": sid,
                                    "files": [{"path": "n.txt", "content": "7"}]})
    assert not out.is_error and "value: 42" in out.text
    assert run_tool(px, RUN_PYTHON, {"code": "1", "session_id": sid, "stdin": "x"}).is_error
    refused = run_tool(px, RUN_PYTHON, {"code": "1", "session_id": sid, "requirements": ["six"]})
    assert refused.is_error and "requirements do not apply" in refused.text
    assert not run_tool(px, "close_session", {"session_id": sid}).is_error
    assert run_tool(px, RUN_PYTHON, {"code": "x", "session_id": sid}).is_error


def test_workspace_tools(px):
    name = "tools-" + uuid.uuid4().hex[:10]
    try:
        px.create_workspace(name)
    except APIError as e:
        if e.status_code == 501:
            pytest.skip(f"this server cannot mount workspaces: {e}")
        raise
    out = run_tool(px, WRITE_WORKSPACE_FILE, {"workspace": name, "path": "data/n.txt", "content": "41"})
    assert not out.is_error and out.text == f"wrote data/n.txt (2 bytes); workspace {name} is at version 1\n"
    assert f"{name}: version 1, " in run_tool(px, LIST_WORKSPACES, {}).text
    out = run_tool(px, RUN_PYTHON, {"workspace": name, "code": "n = int(open('/workspace/data/n.txt').read())\n"
                                    "open('/workspace/data/n.txt', 'w').write(str(n + 1))\nprint(n)"})
    assert not out.is_error and "--- stdout ---\n41\n" in out.text, out.text
    assert f"workspace {name}: version 2 (0 added, 1 modified, 0 deleted)" in out.text
    assert run_tool(px, READ_WORKSPACE_FILE, {"workspace": name, "path": "data/n.txt"}).text == "42"
    assert run_tool(px, LIST_WORKSPACE_FILES, {"workspace": name}).text == "data/\ndata/n.txt (2 bytes)\n"
    ro = run_tool(px, RUN_PYTHON, {"workspace": name, "workspace_read_only": True, "code": "open('/workspace/x', 'w')"})
    assert ro.is_error and "Read-only file system" in ro.text
    assert "needs a workspace" in run_tool(px, RUN_PYTHON, {"code": "1", "workspace_read_only": True}).text
    missing = run_tool(px, READ_WORKSPACE_FILE, {"workspace": "no-such-workspace", "path": "x"})
    assert missing.is_error and "not found" in missing.text
    px.delete_workspace(name)


def test_openai_dict_and_object(px):
    for as_object in (False, True):
        msg = openai_tool_message(px, openai_call({"code": "print(6 * 7)"}, as_object))
        assert msg["role"] == "tool" and msg["tool_call_id"] == "call_1"
        assert msg["content"].startswith("status: completed, exit code 0") and "--- stdout ---\n42\n" in msg["content"]


def test_anthropic_exception_is_error(px):
    block = {"type": "tool_use", "id": "toolu_1", "name": RUN_PYTHON, "input": {"code": "raise ValueError('bad')"}}
    msg = anthropic_tool_result(px, block)
    assert msg["type"] == "tool_result" and msg["tool_use_id"] == "toolu_1" and msg["is_error"] is True
    assert "ValueError: bad" in msg["content"] and "Traceback" in msg["content"]
    ok = anthropic_tool_result(px, SimpleNamespace(id="toolu_2", name=RUN_PYTHON, input={"code": "print(1)"}))
    assert "is_error" not in ok


def test_every_argument(px):
    out = run_tool(px, RUN_PYTHON, {
        "code": "import sys, helper\nprint(helper.X, sys.stdin.read(), sys.version_info[:2])",
        "files": [{"path": "helper.py", "content": "X = 'h'"}],
        "python_version": "3.12", "timeout_seconds": 10, "stdin": "in", "network": False,
    })
    assert not out.is_error and out.result.stdout == "h in (3, 12)\n"


def test_server_refusal_is_an_error_outcome(px):
    out = run_tool(px, RUN_PYTHON, {"code": "1", "python_version": "3.99"})
    assert out.is_error and "unsupported python_version" in out.text and out.result is None
    out = run_tool(px, RUN_PYTHON, {"code": "1", "network": True})  # the server does not allow network
    assert out.is_error and "network" in out.text


def test_secrets_argument(px, monkeypatch):
    # The secrets reach the client's eval and ask for network, which this
    # server refuses: the refusal is the model's to read.
    seen = []
    real = px.eval
    monkeypatch.setattr(px, "eval", lambda **kw: seen.append(kw) or real(**kw))
    out = run_tool(px, RUN_PYTHON, {"code": "1", "secrets": ["GITHUB_TOKEN"]})
    assert seen and seen[0]["secrets"] == ["GITHUB_TOKEN"] and seen[0]["network"] is True
    assert out.is_error and "network access is disabled" in out.text
    out = run_tool(px, RUN_PYTHON, {"code": "1", "secrets": "GITHUB_TOKEN"})
    assert out.is_error and "secrets must be a list of strings" in out.text
    out = run_tool(px, RUN_PYTHON, {"code": "1", "secrets": ["GITHUB_TOKEN"], "session_id": "ses_x"})
    assert out.is_error and "do not apply" in out.text


def test_timeout_is_an_error_outcome(px):
    out = run_tool(px, RUN_PYTHON, {"code": "import time\ntime.sleep(30)", "timeout_seconds": 1})
    assert out.is_error and "timeout" in out.text


async def test_async_helpers(apx):
    msg = await aopenai_tool_message(apx, openai_call({"code": "print('async')"}))
    assert "--- stdout ---\nasync\n" in msg["content"]
    out = await aopenai_response_output(apx, {"type": "function_call", "call_id": "fc", "name": RUN_PYTHON,
                                              "arguments": '{"code": "print(3)"}'})
    assert out["call_id"] == "fc" and "--- stdout ---\n3\n" in out["output"]
    res = await aanthropic_tool_result(apx, {"id": "t", "name": RUN_PYTHON, "input": {"code": "1/0"}})
    assert res["is_error"] and "ZeroDivisionError" in res["content"]


def test_run_python_plot_to_anthropic_image(server, px):
    server.need_tools()
    block = {"id": "t", "name": RUN_PYTHON, "input": {
        "code": "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nresults = {'n': 2}\n", "requirements": ["matplotlib"]}}
    msg = anthropic_tool_result(px, block)
    if "install_error" in str(msg["content"]):
        pytest.skip(f"installing from the package index failed: {msg['content']}")
    kinds = [c["type"] for c in msg["content"]]
    assert kinds == ["text", "image"] and msg["content"][1]["source"]["media_type"] == "image/png"
    assert "--- results ---\n{\"n\":2}" in msg["content"][0]["text"]
    assert "output 1: image/png, image 1 below" in msg["content"][0]["text"]


def test_file_tools(px):
    out = run_tool(px, RUN_PYTHON, {"code": "open('log.txt', 'w').write('x' * 100 + 'end')"})
    eid = out.result.execution_id
    assert "--- files (read one with read_file, execution_id " + eid in out.text and "log.txt (103 bytes" in out.text
    listed = run_tool(px, LIST_FILES, {"execution_id": eid})
    assert not listed.is_error and "file" in listed.text and "\nlog.txt (103 bytes, text/plain" in listed.text
    part = run_tool(px, READ_FILE, {"execution_id": eid, "path": "log.txt", "max_bytes": 60})
    assert part.text.startswith("x" * 60 + "\n[log.txt: bytes 0-60 of 103 shown; call read_file with offset 60")
    rest = run_tool(px, READ_FILE, json.dumps({"execution_id": eid, "path": "log.txt", "offset": 60}))
    assert rest.text == "x" * 40 + "end"
    missing = run_tool(px, READ_FILE, {"execution_id": eid, "path": "nope"})
    assert missing.is_error and "its files are: log.txt" in missing.text
    unknown = run_tool(px, LIST_FILES, {"execution_id": "exe_00000000-0000-0000-0000-000000000000"})
    assert unknown.is_error and "execution not found" in unknown.text
    bad = run_tool(px, READ_FILE, {"execution_id": eid})
    assert bad.is_error and "path is required" in bad.text


def test_lint_tool(server, px):
    server.need_tools()
    out = run_tool(px, LINT_PYTHON, {"code": "import os\n", "select": ["F"]})
    assert not out.is_error and out.text.startswith("1 problem found:\nmain.py:1:8: F401")
    clean = run_tool(px, LINT_PYTHON, {"code": "import helper\nhelper.X\n",
                                         "files": [{"path": "helper.py", "content": "X = 1\n"}], "select": ["F"]})
    assert clean.text == "No problems found.\n"


def test_requirements_are_checked(px):
    out = run_tool(px, RUN_PYTHON, {"code": "1", "requirements": ["--index-url=http://x"]})
    assert out.is_error and "is not one package" in out.text


async def test_async_file_tools(apx):
    out = await arun_tool(apx, RUN_PYTHON, {"code": "open('a.txt', 'w').write('async')"})
    read = await arun_tool(apx, READ_FILE, {"execution_id": out.result.execution_id, "path": "a.txt"})
    assert read.text == "async" and not read.is_error


def test_responses_and_strict_definitions(px):
    responses = px.tools("openai-responses")
    assert {t["name"] for t in responses} == set(TOOLS)
    assert all(t["type"] == "function" and t["strict"] is False and "function" not in t for t in responses)
    strict = {t["name"]: t for t in px.tools("openai-responses", strict=True)}
    params = strict[RUN_PYTHON]["parameters"]
    assert strict[RUN_PYTHON]["strict"] is True and params["additionalProperties"] is False
    assert params["required"] == list(params["properties"])   # every one, in the schema's order
    assert params["properties"]["code"]["type"] == "string"
    assert params["properties"]["timeout_seconds"]["type"] == ["integer", "null"]
    assert all(t["function"]["strict"] is True for t in px.tools("openai", strict=True))


def test_openai_response_output(px):
    # Strict mode sends every argument, null for the ones not given.
    args = {"code": "print(6 * 7)", "files": None, "python_version": None, "timeout_seconds": None, "network": None,
            "stdin": None, "requirements": None, "session_id": None}
    for item in ({"type": "function_call", "call_id": "fc_1", "name": RUN_PYTHON, "arguments": json.dumps(args)},
                 SimpleNamespace(type="function_call", call_id="fc_1", name=RUN_PYTHON, arguments=json.dumps(args))):
        out = openai_response_output(px, item)
        assert out["type"] == "function_call_output" and out["call_id"] == "fc_1"
        assert out["output"].startswith("status: completed, exit code 0") and "--- stdout ---\n42\n" in out["output"]


def test_run_python_plot_to_responses_image(server, px):
    server.need_tools()
    item = {"type": "function_call", "call_id": "fc", "name": RUN_PYTHON, "arguments": json.dumps({
        "code": "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n", "requirements": ["matplotlib"]})}
    out = openai_response_output(px, item)
    if isinstance(out["output"], str) and "install_error" in out["output"]:
        pytest.skip(f"installing from the package index failed: {out['output']}")
    kinds = [c["type"] for c in out["output"]]
    assert kinds == ["input_text", "input_image"]
    assert out["output"][1]["image_url"].startswith("data:image/png;base64,iVBORw0KGgo")
