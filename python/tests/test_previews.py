"""Previews of a session's web app through the clients and the tool
helper, against a live server started with --preview (conftest)."""

from __future__ import annotations

import random
from datetime import datetime, timezone

import httpx
import pytest

from pyexec_client import APIError, PortShare
from pyexec_client.previews import without_userinfo
from pyexec_client.tools import PREVIEW_SESSION_PORT, arun_tool, run_tool

#: A cell that serves its working directory, holding a page with a marker,
#: from a child process on 127.0.0.1:PORT, and waits until it listens.
APP = """
import socket, subprocess, sys, time
open('index.html', 'w').write('<h1>served from the session</h1>')
app = subprocess.Popen([sys.executable, '-m', 'http.server', '{port}', '--bind', '127.0.0.1'],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(100):
    try:
        socket.create_connection(('127.0.0.1', {port}), timeout=1).close()
        break
    except OSError:
        time.sleep(0.1)
print('listening')
"""


def _port() -> int:
    return random.randint(20000, 40000)


def _fetch(url: str) -> httpx.Response:
    """GET url without any key; skips when the server cannot reach the
    session's network namespace (unsafe mode: no namespace of its own)."""
    resp = httpx.get(url, timeout=30)
    if resp.status_code == 409 and "namespace" in resp.text:
        pytest.skip(f"this server cannot reach a session's ports: {resp.text}")
    return resp


def test_share_and_revoke_port(px, server):
    port = _port()
    with px.session() as s:
        assert "listening" in s.execute(APP.format(port=port)).stdout
        share = s.share_port(port)
        assert isinstance(share, PortShare)
        assert share.url.startswith(server.url + "/preview/") and share.url.endswith("/")
        assert share.session_id == s.id and share.port == port and share.isolation == "sandbox"
        assert share.expires_at is not None and share.expires_at > datetime.now(timezone.utc)
        resp = _fetch(share.url)
        assert resp.status_code == 200 and "served from the session" in resp.text
        assert s.revoke_port(port) == 1
        resp = httpx.get(share.url, timeout=30)
        assert resp.status_code == 403 and "revoked" in resp.text
        with pytest.raises(ValueError):
            s.share_port(0)


async def test_share_and_revoke_port_async(apx, server):
    port = _port()
    async with apx.session() as s:
        assert "listening" in (await s.execute(APP.format(port=port))).stdout
        share = await s.share_port(port)
        assert share.url.startswith(server.url + "/preview/") and share.port == port
        assert "served from the session" in _fetch(share.url).text
        assert await s.revoke_port(port) == 1
        assert httpx.get(share.url, timeout=30).status_code == 403


def test_unknown_session(px):
    from pyexec_client import Session
    with pytest.raises(APIError) as e:
        Session(px, "ses_00000000-0000-7000-8000-000000000000").share_port(8000)
    assert e.value.status_code == 404


def test_preview_tool(px, server):
    port = _port()
    with px.session() as s:
        assert "listening" in s.execute(APP.format(port=port)).stdout
        out = run_tool(px, PREVIEW_SESSION_PORT, {"session_id": s.id, "port": port})
        assert not out.is_error, out.text
        first, second = out.text.splitlines()
        url = first.rsplit(" ", 1)[1]
        assert first.startswith(f"preview of port {port} of session {s.id}: {server.url}/preview/")
        assert second.startswith("expires at ") and second.endswith("(isolation: sandbox)")
        assert "served from the session" in _fetch(url).text
        out = run_tool(px, PREVIEW_SESSION_PORT, {"session_id": s.id, "port": port, "revoke": True})
        assert not out.is_error and out.text == f"revoked 1 preview URL(s) of port {port} of session {s.id}\n"
        assert httpx.get(url, timeout=30).status_code == 403
    for bad in ({"session_id": "ses_x"}, {"session_id": "ses_x", "port": "80"}, {"session_id": "ses_x", "port": 0},
                {"session_id": "ses_x", "port": 80, "revoke": "yes"}):
        refused = run_tool(px, PREVIEW_SESSION_PORT, bad)
        assert refused.is_error and refused.text.startswith("error: "), bad
    gone = run_tool(px, PREVIEW_SESSION_PORT, {"session_id": "ses_00000000-0000-7000-8000-000000000000", "port": 80})
    assert gone.is_error and "not found" in gone.text


async def test_preview_tool_async(apx):
    async with apx.session() as s:
        out = await arun_tool(apx, PREVIEW_SESSION_PORT, {"session_id": s.id, "port": 8000, "revoke": True})
        assert not out.is_error and out.text == f"revoked 0 preview URL(s) of port 8000 of session {s.id}\n"


def test_without_userinfo():
    assert without_userinfo("https://u:p@example.com:8443/base/") == "https://example.com:8443/base"
    assert without_userinfo("http://[::1]:8080") == "http://[::1]:8080"
    assert without_userinfo("http://u@[::1]:8080") == "http://[::1]:8080"
    assert PortShare.from_dict({"url": "/preview/t/", "port": 1}, "http://a:b@h:1").url == "http://h:1/preview/t/"
    assert PortShare.from_dict({"url": "https://p.example/preview/t/"}, "http://h").url == "https://p.example/preview/t/"
