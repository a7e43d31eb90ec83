"""Tests that need no server for the agent additions: rich outputs,
files, diagnostics and the file tools' rendering."""

from __future__ import annotations

import base64

import pytest

from pyexec_client import Diagnostic, ExecutionResult, FileInfo, Output
from pyexec_client._file_tools import BadArguments, find, read_request, render_lint, render_read
from pyexec_client._files import file_path
from pyexec_client.tools import render_result

PNG = b"\x89PNG\r\n\x1a\nbytes"


def test_output_helpers():
    o = Output.from_dict({"type": "display", "data": {
        "text/plain": "<Figure>", "image/png": base64.b64encode(PNG).decode(), "text/html": "<b>x</b>",
        "application/json": {"columns": ["a"]}}})
    assert o.plain == "<Figure>" and o.html == "<b>x</b>" and o.json == {"columns": ["a"]}
    assert o.png == PNG and o.image() == ("image/png", PNG)
    svg = Output.from_dict({"type": "display", "data": {"image/svg+xml": "<svg/>"}})
    assert svg.png is None and svg.image() == ("image/svg+xml", b"<svg/>")
    broken = Output.from_dict({"type": "display", "data": {"image/png": "not base64!"}})
    assert broken.png is None and broken.image() is None


def test_result_decodes_rich_fields():
    r = ExecutionResult.from_dict({
        "execution_id": "exe_1", "status": "completed", "results": {"n": 1},
        "outputs": [{"type": "display", "data": {"image/png": base64.b64encode(PNG).decode()}}],
        "files": [{"path": "a.png", "size": 12, "sha256": "ff", "mime": "image/png",
                   "content": base64.b64encode(PNG).decode()}, {"path": "b.csv", "size": 3}],
        "files_omitted": 2, "outputs_truncated": True, "warnings": ["w"],
        "lint": [{"code": "F401", "message": "unused", "location": {"line": 1, "column": 8},
                  "end_location": {"line": 1, "column": 10}, "fix": None, "filename": "main.py"}]})
    assert r.results == {"n": 1} and r.images == [("image/png", PNG)] and r.outputs_truncated
    assert r.files == [FileInfo("a.png", 12, "ff", "image/png", PNG), FileInfo("b.csv", 3)]
    assert r.files_omitted == 2 and r.warnings == ["w"]
    assert r.lint == [Diagnostic("F401", "unused", "main.py", 1, 8, 1, 10, None)]


def test_render_result_lists_rich_parts():
    r = ExecutionResult.from_dict({
        "execution_id": "exe_1", "status": "completed", "stdout": "hi\n", "results": {"n": 1},
        "outputs": [{"type": "display", "data": {"text/plain": "<Figure>", "image/png": base64.b64encode(PNG).decode()}},
                    {"type": "display", "data": {"text/plain": "  a\n0 1\n", "text/html": "<table/>"}}],
        "files": [{"path": "out.csv", "size": 3, "mime": "text/csv"}], "files_omitted": 1})
    assert render_result(r) == (
        "status: completed, exit code 0\n--- stdout ---\nhi\n--- results ---\n{\"n\":1}\n"
        "--- output 1: image/png, image 1 below ---\n--- output 2 (text/html, text/plain) ---\n  a\n0 1\n"
        "--- files (read one with read_file, execution_id exe_1) ---\nout.csv (3 bytes, text/csv)\n"
        "[1 more file not collected: over the server's limits]\n")


def test_render_lint():
    assert render_lint([]) == "No problems found.\n"
    diags = [Diagnostic("F401", "`os` imported but unused", "main.py", 1, 8, 1, 10, {"message": "Remove it"}),
             Diagnostic("", "SyntaxError: x", "lib.py", 2, 1, 2, 2)]
    assert render_lint(diags) == ("2 problems found:\nmain.py:1:8: F401 `os` imported but unused (fix: Remove it)\n"
                                  "lib.py:2:1: error SyntaxError: x\n")


@pytest.mark.parametrize("mime,data,offset,max_bytes,want_text,want_image", [
    ("text/csv", b"a,b\n", 0, 100, "a,b\n", None),
    ("text/plain", b"abcdef", 0, 4, "abcd\n[f: bytes 0-4 of 6 shown; call read_file with offset 4 to read on]\n", None),
    ("image/png", PNG, 0, 100, "f (image/png, 13 bytes):\n", ("image/png", PNG)),
    ("application/octet-stream", b"\0\1\2", 0, 100, "f is binary (application/octet-stream, 6 bytes)", None),
    ("application/octet-stream", b"plain log", 6, 100, "log", None),
])
def test_render_read(mime, data, offset, max_bytes, want_text, want_image):
    text, image = render_read("exe_1", FileInfo("f", 6, "", mime), data, offset, max_bytes)
    assert text.startswith(want_text) and image == want_image


def test_file_arguments():
    files = [FileInfo("a.txt", 1), FileInfo("b.txt", 1)]
    assert find("exe_1", files, "b.txt") == files[1]
    with pytest.raises(BadArguments, match="its files are: a.txt, b.txt"):
        find("exe_1", files, "c.txt")
    with pytest.raises(BadArguments, match="produced no files"):
        find("exe_1", [], "c.txt")
    assert read_request({"execution_id": "e", "path": "./x"}) == ("e", "x", 0, 65536)
    with pytest.raises(BadArguments, match="max_bytes"):
        read_request({"execution_id": "e", "path": "x", "max_bytes": 0x200000})
    with pytest.raises(BadArguments, match="path is required"):
        read_request({"execution_id": "e"})


def test_file_path_escapes_segments():
    assert file_path("exe_1", "out/a b#.csv") == "/api/v1/executions/exe_1/files/out/a%20b%23.csv"


def test_workspace_tool_rendering():
    from pyexec_client import _workspace_tools as wt

    req = {"name": "proj", "path": "notes.txt", "offset": 0, "max_bytes": 5}
    assert wt.render_read(req, "héllo".encode()) == "héll\n[notes.txt: bytes 0-5 shown; call read_workspace_file with offset 5 to read on]\n"
    assert wt.render_read(dict(req, offset=5), "héllo".encode()) == "o"
    assert wt.render_read(dict(req, offset=6), b"hello") == "[notes.txt: nothing at offset 6]\n"
    assert "is binary" in wt.render_read(req, b"\x00\x01\xff")
    assert "is binary" in wt.render_read(dict(req, max_bytes=10), b"\xff\xfe\xfd\xfc ok")
    with pytest.raises(BadArguments, match="needs a workspace"):
        wt.mode({"workspace_read_only": True})
    assert wt.mode({"workspace": "p", "workspace_read_only": True}) == ("p", "ro")
    assert wt.mode({"workspace": "p"}) == ("p", None)
    with pytest.raises(BadArguments, match="max_bytes"):
        wt.request(wt.READ_WORKSPACE_FILE, {"workspace": "p", "path": "x", "max_bytes": 0})
    files = [{"path": "d", "type": "dir"}, {"path": "d/a", "type": "file", "size": 3}, {"path": "l", "type": "symlink", "target": "d/a"}]
    assert wt.render_files("proj", files) == "d/\nd/a (3 bytes)\nl -> d/a\n"
    r = ExecutionResult.from_dict({"execution_id": "exe_1", "status": "completed", "stdout": "x\n",
                                   "workspace": {"name": "proj", "mode": "rw", "version": 3, "changed": True, "added": 1}})
    assert r.workspace["version"] == 3
    assert "--- stdout ---\nx\nworkspace proj: version 3 (1 added, 0 modified, 0 deleted)\n" in render_result(r)
