# pyexec's import detector. It runs inside a jail without network, under
# the interpreter that will run the project, and parses every .py file of
# the working directory with that interpreter's own ast module. It never
# imports or executes the project's code. It prints one JSON object.
import ast
import json
import os
import sys

GUARDS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
MAX_CALLS = 2000


def dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def guards_import(handler):
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(dotted(t) in GUARDS for t in types)


def is_type_checking(test):
    name = dotted(test)
    return name in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


class Visitor(ast.NodeVisitor):
    def __init__(self, path, out):
        self.path = path
        self.out = out
        self.optional = 0
        self.aliases = {}

    def add_import(self, module, line):
        self.out["imports"].append(
            {"module": module, "file": self.path, "line": line, "optional": self.optional > 0})

    def visit_Try(self, node):
        guarded = any(guards_import(h) for h in node.handlers)
        self.optional += guarded
        for stmt in node.body:
            self.visit(stmt)
        self.optional -= guarded
        for part in node.handlers + node.orelse + node.finalbody:
            self.visit(part)

    visit_TryStar = visit_Try

    def visit_If(self, node):
        if is_type_checking(node.test):
            for stmt in node.orelse:
                self.visit(stmt)
            return
        self.generic_visit(node)

    def visit_Import(self, node):
        for a in node.names:
            self.add_import(a.name, node.lineno)
            if a.asname:
                self.aliases[a.asname] = a.name
            else:
                top = a.name.split(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node):
        if node.level or not node.module:
            return
        self.add_import(node.module, node.lineno)
        for a in node.names:
            if a.name != "*":
                self.aliases[a.asname or a.name] = node.module + "." + a.name

    def visit_Call(self, node):
        name = dotted(node.func)
        if name is not None:
            head, _, rest = name.partition(".")
            full = self.aliases.get(head, head) + ("." + rest if rest else "")
            if len(self.out["calls"]) < MAX_CALLS:
                self.out["calls"].append({"name": full, "file": self.path, "line": node.lineno})
            if full in ("__import__", "importlib.import_module") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not arg.value.startswith("."):
                    self.add_import(arg.value, node.lineno)
        self.generic_visit(node)


def main():
    out = {
        "stdlib": sorted(getattr(sys, "stdlib_module_names", None) or []) or None,
        "builtin": sorted(sys.builtin_module_names),
        "imports": [],
        "calls": [],
        "errors": [],
        "deep": [],
    }
    for root, dirs, files in os.walk("."):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.normpath(os.path.join(root, f))
            try:
                with open(path, "rb") as fh:
                    tree = ast.parse(fh.read(), filename=path)
            except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
                # Code too complex to parse cannot compile either: the run
                # reports it.
                out["errors"].append({"file": path, "line": getattr(e, "lineno", 0) or 0,
                                      "message": str(e) or type(e).__name__})
                continue
            try:
                Visitor(path, out).visit(tree)
            except RecursionError:
                # Parsed, but nested too deeply to walk: its imports and
                # calls are unknown, which the server refuses.
                out["deep"].append(path)
    json.dump(out, sys.stdout)


main()
