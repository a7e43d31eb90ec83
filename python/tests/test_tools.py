"""The tool-call helpers against a live server, with calls shaped as the
OpenAI and Anthropic SDKs produce them (dicts and objects)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from pyexec_client.tools import (
    RUN_PYTHON,
    aanthropic_tool_result,
    anthropic_tool_result,
    aopenai_tool_message,
    openai_tool_message,
    run_tool,
)


def openai_call(args, as_object=False):
    call = {"id": "call_1", "type": "function", "function": {"name": RUN_PYTHON, "arguments": json.dumps(args)}}
    if as_object:
        return SimpleNamespace(id="call_1", type="function",
                               function=SimpleNamespace(name=RUN_PYTHON, arguments=json.dumps(args)))
    return call


def test_definitions_match_the_helper(px):
    tools = {t["function"]["name"]: t for t in px.tools("openai")}
    assert set(tools) == {RUN_PYTHON, "create_session", "close_session"}
    params = tools[RUN_PYTHON]["function"]["parameters"]
    assert params["required"] == ["code"]
    assert set(params["properties"]) == {"code", "files", "python_version", "timeout_seconds", "network", "stdin",
                                         "session_id"}


def test_session_tools(px):
    created = run_tool(px, "create_session", {})
    assert not created.is_error and created.text.startswith("session ses_")
    sid = created.text.split()[1]
    assert not run_tool(px, RUN_PYTHON, {"code": "x = 6", "session_id": sid}).is_error
    out = run_tool(px, RUN_PYTHON, {"code": "x * int(open('n.txt').read())", "session_id": sid,
                                    "files": [{"path": "n.txt", "content": "7"}]})
    assert not out.is_error and "value: 42" in out.text
    assert run_tool(px, RUN_PYTHON, {"code": "1", "session_id": sid, "stdin": "x"}).is_error
    assert not run_tool(px, "close_session", {"session_id": sid}).is_error
    assert run_tool(px, RUN_PYTHON, {"code": "x", "session_id": sid}).is_error


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


def test_timeout_is_an_error_outcome(px):
    out = run_tool(px, RUN_PYTHON, {"code": "import time\ntime.sleep(30)", "timeout_seconds": 1})
    assert out.is_error and "timeout" in out.text


async def test_async_helpers(apx):
    msg = await aopenai_tool_message(apx, openai_call({"code": "print('async')"}))
    assert "--- stdout ---\nasync\n" in msg["content"]
    res = await aanthropic_tool_result(apx, {"id": "t", "name": RUN_PYTHON, "input": {"code": "1/0"}})
    assert res["is_error"] and "ZeroDivisionError" in res["content"]
