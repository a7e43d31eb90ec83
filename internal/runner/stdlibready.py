# pyexec fork server: standard-library modules imported once, for every
# execution.
#
# Definitions only, run before forkserver.py in the same program (see
# ForkServerStdin): they use that file's globals when called.
#
# A payload forgets every module the fork server imported after its preloads
# (_fresh_state): its sys.modules starts as a fresh interpreter's. Code that
# then imports json, re or datetime would pay the import in every execution
# (15 ms for json, re and math alone). So the server imports the commonest of
# the standard library (_STDLIB_COMMON) once, and each payload gets a meta
# path finder (_StdlibFinder) that hands out the server's module object when,
# and only when, the payload imports it — with the modules that import made
# (its closure, _STDLIB_CLOSURE), so that sys.modules afterwards holds what a
# fresh interpreter's would. Until then nothing of them shows. A payload is a
# fork: what one execution does to such a module is its own copy's.
#
# A module the payload's search path would find before the standard library
# (a user's json.py beside main.py) wins as in a fresh interpreter: the
# finder then steps aside for the rest of the execution (_stdlib_shadowed).

# What the server imports, in this order: the standard library modules
# snippets import most. json, re, math, collections, functools and the
# like are in the server already (its own imports and the driver's); the
# rest cost ≈ 4.2 MiB of its anonymous memory, which every fork and exit
# pays for in page tables (≈ 40 µs a MiB): dataclasses 1.5 MiB (it imports
# inspect), pathlib 0.7, typing 0.6, hashlib 0.5, statistics 0.4, the
# others less (docs/performance.md).
_STDLIB_COMMON = (
    "re", "json", "math", "random", "collections", "itertools", "functools", "operator", "datetime", "time",
    "string", "typing", "dataclasses", "statistics", "decimal", "fractions", "textwrap", "csv", "pathlib",
    "hashlib", "base64", "copy", "heapq", "bisect", "enum", "struct", "pprint", "urllib.parse", "contextlib",
    "numbers", "secrets", "unicodedata", "glob", "traceback",
)

# name -> (module, its parent package's object or None, its own spec), for
# every module the server imported after its preloads.
_STDLIB_READY = {}
# name -> (name, module) of the others a fresh import of name loads.
_STDLIB_CLOSURE = {}
# Top-level names a file on the search path could shadow, and the
# directories they came from.
_STDLIB_TOPS = frozenset()
_STDLIB_DIRS = frozenset()
# The real __import__ and the edges recorded, while _stdlib_track records.
_STDLIB_TRACKING = None
# The import system's own modules, whose frames run an extension module's
# initialization.
_MACHINERY = frozenset(("_frozen_importlib", "_frozen_importlib_external", "importlib._bootstrap",
                        "importlib._bootstrap_external"))


def _stdlib_track():
    # From here on, records which module imports which (by the import
    # statements run while each module loads): the closures. _stdlib_ready
    # stops it.
    global _STDLIB_TRACKING
    b = sys.modules["builtins"]
    real, edges, loading = b.__import__, {}, []

    def tracking(name, globals=None, locals=None, fromlist=(), level=0):
        full = None
        try:
            g = globals if isinstance(globals, dict) else {}
            importer = g.get("__name__")
            if not isinstance(importer, str) or importer in _MACHINERY:
                # An extension module's initialization imports from the
                # import system's frames: the importer is what is loading.
                importer = loading[-1] if loading else None
            full = name
            if level:
                pkg = g.get("__package__") or g.get("__name__", "").rpartition(".")[0]
                base = pkg.rsplit(".", level - 1)[0] if level > 1 else pkg
                full = base + "." + name if name else base
            if importer is not None:
                got = edges.setdefault(importer, set())
                got.add(full)
                for f in fromlist or ():
                    got.add(full + "." + f)  # kept only where that is a module
        except Exception:
            pass  # only the closures' accuracy: never an import's failure
        loading.append(full)
        try:
            return real(name, globals, locals, fromlist, level)
        finally:
            loading.pop()

    b.__import__ = tracking
    _STDLIB_TRACKING = real, edges


def _stdlib_ready(keep):
    # Imports _STDLIB_COMMON, stops recording, and makes the tables the
    # payloads' finder serves from.
    global _STDLIB_TRACKING
    for name in _STDLIB_COMMON:
        try:
            __import__(name)
        except Exception:
            pass  # an interpreter built without it: the payload imports it (or fails) as it would anyway
    real, edges = _STDLIB_TRACKING
    sys.modules["builtins"].__import__ = real
    _STDLIB_TRACKING = None
    try:
        _stdlib_tables(keep, edges)
    except Exception as e:  # only speed: payloads then import as a fresh interpreter does
        _STDLIB_READY.clear()
        sys.stderr.write("pyexec fork server: not serving standard-library modules: %s\n" % e)


def _stdlib_tables(keep, edges):
    global _STDLIB_TOPS, _STDLIB_DIRS
    modspec = type(sys.__spec__)
    ready, aliases, closure, tops, dirs = {}, {}, {}, set(), set()
    for name, m in list(sys.modules.items()):
        if name in keep or name == "__main__":
            continue
        spec = getattr(m, "__spec__", None)
        parent = name.rpartition(".")[0]
        if not isinstance(spec, modspec) or spec.name != name:
            # An entry a package put there itself (importlib._bootstrap,
            # typing.io): never served, put back with its package.
            if parent:
                aliases.setdefault(parent, []).append((name, m))
            continue
        ready[name] = (m, sys.modules.get(parent) if parent else None, spec)
    for name, (m, _, spec) in ready.items():
        out, todo = set(), list(edges.get(name, ()))
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        while todo:
            n = todo.pop()
            if n in out or n == name or n not in ready:
                continue
            out.add(n)
            todo += edges.get(n, ())
            parts = n.split(".")
            todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # its packages load first
        closure[name] = tuple(sorted((n, ready[n][0]) for n in out)) + tuple(
            a for n in sorted(out | {name}) for a in aliases.get(n, ()))
        if "." not in name and spec.origin not in (None, "built-in", "frozen"):
            tops.add(name)
            d = os.path.dirname(spec.origin)
            dirs.add(os.path.dirname(d) if spec.submodule_search_locations is not None else d)
    _STDLIB_CLOSURE.update(closure)
    _STDLIB_TOPS, _STDLIB_DIRS = frozenset(tops), frozenset(dirs)
    _STDLIB_READY.update(ready)  # last: the finder serves from it


def _stdlib_serve():
    # In a payload, after its sys.modules was cut back to _KEEP.
    if _STDLIB_READY:
        sys.meta_path.insert(0, _StdlibFinder)


def _stdlib_shadowed():
    # Whether a directory the search path holds before the standard
    # library's has a file or package of one of its top-level names (or
    # cannot be read to tell).
    for entry in sys.path:
        if entry in _STDLIB_DIRS:
            return False
        try:
            names = os.listdir(entry or ".")
        except FileNotFoundError:
            continue
        except OSError:
            return True  # a zip, say, or unreadable: it might hold one
        for n in names:
            if n.partition(".")[0] in _STDLIB_TOPS:
                return True
    return True  # no standard library on the path: whatever it is, not ours


class _StdlibFinder:
    # A meta path finder and loader handing out the server's modules.

    @staticmethod
    def find_spec(name, path=None, target=None):
        got = _STDLIB_READY.get(name)
        if got is None or target is not None:  # a reload runs the module's code again, as it would anyway
            return None
        m, parent, spec = got
        if parent is not None:
            if sys.modules.get(name.rpartition(".")[0]) is not parent:
                return None  # a package of another origin: its own submodules
        elif _stdlib_shadowed():  # a built-in's closure may hold modules a file could shadow
            try:
                sys.meta_path.remove(_StdlibFinder)
            except ValueError:
                pass
            return None
        for n, o in _STDLIB_CLOSURE[name]:
            if n not in sys.modules:
                sys.modules[n] = o
        served = type(spec)(name, _StdlibFinder, origin=spec.origin, loader_state=m)
        served.submodule_search_locations = spec.submodule_search_locations
        return served

    @staticmethod
    def create_module(spec):
        return spec.loader_state

    @staticmethod
    def exec_module(module):
        # The import machinery set __spec__ to the served one: the module's
        # own goes back (its loader, origin and cache are the real ones).
        module.__spec__ = _STDLIB_READY[module.__spec__.name][2]
