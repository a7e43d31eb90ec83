"""The client's modules import each other without a circle: the import
graph of pyexec_client and python_executor_client, read from the source
with ast (imports under ``if TYPE_CHECKING:`` and inside functions count
too), has no cycle. Needs no server."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pyexec_client", "python_executor_client")


def modules(root: Path, packages: tuple) -> Dict[str, Path]:
    """Every module of the packages under root, by dotted name (a
    package's __init__ by the package's name)."""
    found = {}
    for pkg in packages:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = f
    return found


def import_graph(root: Path, packages: tuple) -> Dict[str, Set[str]]:
    """For each module, the modules of the packages it imports."""
    mods = modules(root, packages)
    graph: Dict[str, Set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + 1] if node.level else []
                mod = ".".join(base + ([node.module] if node.module else []))
                # `from m import x`: an edge to the submodule m.x where x is
                # one, else to m itself.
                subs = [f"{mod}.{a.name}" for a in node.names]
                targets = [t for t in subs if t in mods]
                if len(targets) < len(subs):
                    targets.append(mod)
            graph[name].update(t for t in targets if t in mods and t != name)
    return graph


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One cycle of the graph as [a, b, ..., a], or None."""
    state: Dict[str, int] = {}  # 1 on the path, 2 done
    path: List[str] = []

    def visit(n: str) -> Optional[List[str]]:
        state[n] = 1
        path.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                return path[path.index(d):] + [d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        path.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_client_modules_have_no_import_cycle():
    graph = import_graph(ROOT, PACKAGES)
    assert "pyexec_client.sessions" in graph and "pyexec_client._transport" in graph["pyexec_client.sessions"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_a_type_checking_import_back_is_a_cycle(tmp_path: Path):
    # The check sees the kind of circle the clients once had: a helper
    # importing its client only for type hints.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .client import Client\n")
    (pkg / "client.py").write_text("from .sessions import Session\nclass Client: ...\n")
    (pkg / "sessions.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .client import Client\nclass Session: ...\n")
    assert find_cycle(import_graph(tmp_path, ("pkg",))) == ["pkg.client", "pkg.sessions", "pkg.client"]
    (pkg / "sessions.py").write_text("class Session: ...\n")
    assert find_cycle(import_graph(tmp_path, ("pkg",))) is None
