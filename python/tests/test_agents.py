"""Rich outputs, execution files, lint and requirements with the client,
sync and async, against the live server."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import skip_install_error

from pyexec_client import Diagnostic, NotFoundError, Output

PLOT = """import os
import matplotlib.pyplot as plt
plt.figure(figsize=(4, 3), dpi=50)
plt.plot([1, 3, 2])
plt.savefig("chart.png")
os.makedirs("out")
with open("out/data.csv", "w") as f:
    f.write("x,y\\n1,3\\n")
results = {"points": 3}
display({"shown": True})
"""

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_rich_outputs_and_files(server, px, tmp_path):
    server.need_tools()
    r = px.eval(PLOT, requirements="matplotlib\n")
    skip_install_error(r)
    assert r.ok, r.stderr
    assert r.results == {"points": 3}
    kinds = [(o.type, sorted(o.data)) for o in r.outputs]
    assert kinds == [("display", ["text/plain"]), ("display", ["image/png", "text/plain"])], kinds
    assert r.outputs[0].plain == "{'shown': True}" and r.outputs[0].png is None and r.outputs[0].image() is None
    figure = next(o for o in r.outputs if o.png is not None)
    assert isinstance(figure, Output) and figure.png.startswith(PNG_MAGIC)
    assert figure.image()[0] == "image/png" and figure.plain.startswith("<Figure")
    assert r.images == [("image/png", figure.png)]

    listed = {f.path: f for f in r.files}
    assert set(listed) >= {"chart.png", "out/data.csv"}
    assert listed["out/data.csv"].size == 8 and listed["out/data.csv"].mime.startswith("text/csv")
    assert listed["chart.png"].content is not None and listed["chart.png"].content.startswith(PNG_MAGIC)

    assert {f.path for f in px.list_files(r.execution_id)} == set(listed)
    assert px.download_file(r.execution_id, "out/data.csv") == b"x,y\n1,3\n"
    saved = px.download_file(r.execution_id, "out/data.csv", tmp_path)
    assert saved == tmp_path / "data.csv" and saved.read_bytes() == b"x,y\n1,3\n"
    png = px.download_file(r.execution_id, "chart.png", tmp_path / "plot.png")
    assert Path(png).read_bytes() == listed["chart.png"].content
    with pytest.raises(NotFoundError, match="file not found"):
        px.download_file(r.execution_id, "missing.txt")
    with pytest.raises(NotFoundError, match="execution not found"):
        px.list_files("exe_00000000-0000-0000-0000-000000000000")


def test_lint(server, px):
    server.need_tools()
    diags = px.lint("import os\nprint(undefined)\n", select=["F"])
    assert [(d.code, d.line, d.column) for d in diags] == [("F401", 1, 8), ("F821", 2, 7)]
    assert isinstance(diags[0], Diagnostic) and diags[0].filename == "main.py" and diags[0].fix
    assert px.lint("x = 1\n", select=["F"]) == []
    multi = px.lint(files={"main.py": "import helper\n", "helper.py": "import sys\n"}, select=["F401"])
    assert sorted((d.filename, d.code) for d in multi) == [("helper.py", "F401"), ("main.py", "F401")]
    assert "F401" not in {d.code for d in px.lint("import os\n", ignore=["F401"])}
    snippet = "def f(x):\n    print(x)\n"
    assert px.lint(snippet) == []  # the default profile: bugs, not style
    assert {"D103", "T201"} <= {d.code for d in px.lint(snippet, profile="strict")}


def test_requirements_install(server, px):
    server.need_tools()
    r = px.eval("import six\nprint(six.__name__)", requirements="six\n")
    skip_install_error(r)
    assert r.ok and r.stdout == "six\n", r


async def test_async_files_and_lint(server, apx, tmp_path):
    r = await apx.eval("open('note.txt', 'w').write('hello')")
    assert r.ok and "note.txt" in [f.path for f in r.files]
    assert "note.txt" in [f.path for f in await apx.list_files(r.execution_id)]
    assert await apx.download_file(r.execution_id, "note.txt") == b"hello"
    out = await apx.download_file(r.execution_id, "note.txt", tmp_path)
    assert out.read_text() == "hello"
    if not server.no_tools:
        assert [d.code for d in await apx.lint("import os\n", select=["F"])] == ["F401"]


async def test_async_rich_outputs(server, apx):
    server.need_tools()
    r = await apx.eval("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n", requirements="matplotlib\n")
    skip_install_error(r)
    assert r.ok and len(r.images) == 1 and r.images[0][1].startswith(PNG_MAGIC)


def test_display_events(server, px):
    eid = px.submit({"main.py": "display({'a': 1})\nprint('done')\n"})
    outs = [ev.output() for ev in px.events(eid) if ev.type == "display"]
    assert [o.plain for o in outs] == ["{'a': 1}"]
