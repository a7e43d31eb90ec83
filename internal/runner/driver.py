# pyexec runner driver.
#
# The jail starts this instead of the user's program, as
#     python -B -c <this source> --report-fd N [--eval-last-expr] -- ENTRY [ARGS...]
# It runs ENTRY as __main__ the way `python ENTRY ARGS...` would and, at the
# end, writes one JSON line describing the outcome to a private copy of fd N.
#
# Rules this file keeps:
# - It travels on argv, so it stays small (the Go side checks < 32 KiB).
# - It imports nothing before the user's code runs: only modules the
#   interpreter loaded at startup, so a user's json.py or random.py shadows the
#   standard library for the user exactly as with `python main.py`. The error
#   path imports traceback with the project directory off sys.path.
# - None of its frames appears in a traceback shown to the user.
# - It supports every CPython from 3.8.

import os
import sys

_G = globals()
_MAX_RESULT = 1 << 20  # characters of a result repr kept
_MAX_TEXT = 256 << 10  # characters of an error value or traceback kept
_ESC = {i: "\\u%04x" % i for i in range(32)}
_ESC[ord('"')] = '\\"'
_ESC[ord("\\")] = "\\\\"


def _json(v):
    # Enough JSON for the report: None, bool, int, str and dicts of them.
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, str):
        return '"' + v.translate(_ESC) + '"'
    return "{" + ",".join(_json(k) + ":" + _json(x) for k, x in v.items()) + "}"


class _Channel:
    # The report fd, moved off its well-known number before user code runs so
    # that children started by the user do not inherit it (os.dup returns a
    # close-on-exec fd). The user may close or reuse the number: the write
    # happens only if it still names the same pipe, and only in the process
    # that started (a fork()ed child returning into the driver stays quiet).

    def __init__(self, fd):
        self.fd = -1
        self.pid = os.getpid()
        try:
            self.fd = os.dup(fd)
            os.close(fd)
            st = os.fstat(self.fd)
        except OSError:
            return  # no channel: run anyway, the caller uses the exit code
        self.ident = (st.st_dev, st.st_ino)

    def send(self, report):
        if self.fd < 0 or os.getpid() != self.pid:
            return
        try:
            st = os.fstat(self.fd)
            if (st.st_dev, st.st_ino) != self.ident:
                return
            data = memoryview((_json(report) + "\n").encode("utf-8", "backslashreplace"))
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:
            pass


def _usage(msg):
    sys.stderr.write("pyexec driver: %s\n" % msg)
    sys.exit(2)


def _parse(argv):
    fd, last = 3, False
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] == "--report-fd" and i + 1 < len(argv) and argv[i + 1].isdigit():
            fd = int(argv[i + 1])
            i += 2
        elif argv[i] == "--eval-last-expr":
            last = True
            i += 1
        else:
            _usage("unknown option %r" % argv[i])
    if i + 1 >= len(argv):
        _usage("missing -- ENTRY")
    if fd < 3:
        _usage("report fd must be 3 or more")
    return fd, last, argv[i + 1], argv[i + 2:]


def _compile(src, path, last):
    # Returns (body, tail): tail is the final top-level expression compiled
    # in eval mode when last is set, else None. Line numbers stay the file's.
    if not last:
        return compile(src, path, "exec", 0, True), None
    tree = compile(src, path, "exec", 0x400, True)  # ast.PyCF_ONLY_AST
    if not tree.body or type(tree.body[-1]).__name__ != "Expr":
        return compile(tree, path, "exec", 0, True), None
    expr = tree.body.pop().value
    wrap = type(compile("0", path, "eval", 0x400, True))  # ast.Expression
    return compile(tree, path, "exec", 0, True), compile(wrap(expr), path, "eval", 0, True)


def _user_roots(entry):
    roots = []
    for d in (os.getcwd(), os.path.dirname(os.path.realpath(entry))):
        d = os.path.realpath(d)
        if d not in roots:
            roots.append(d)
    return roots


def _user_file(path, roots):
    # The user's name for path (relative to the workspace, roots[0]) when it
    # is the user's code; None for the driver, the stdlib and packages.
    if not path or path[0] == "<":
        return None
    p = os.path.realpath(path)
    parts = p.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return None
    for r in roots:
        if p.startswith(r.rstrip(os.sep) + os.sep):
            return os.path.relpath(p, roots[0]) if r == roots[0] else p
    return None


def _stdlib_import(name, clean_path):
    saved = sys.path
    sys.path = list(clean_path)
    try:
        __import__(name)
        return sys.modules[name]
    finally:
        sys.path = saved


def _cut(s, n):
    return s if len(s) <= n else s[:n] + "\n... (truncated)"


def _describe(e, roots, clean_path):
    name = type(e).__name__
    try:
        value = str(e)
    except BaseException:
        value = "<exception str() failed>"
    try:
        tb = _stdlib_import("traceback", clean_path)
        text = "".join(tb.format_exception(type(e), e, e.__traceback__))
    except BaseException:
        text = "%s: %s\n" % (name, value)
    file = line = None
    if isinstance(e, SyntaxError) and _user_file(e.filename, roots):
        file, line = _user_file(e.filename, roots), e.lineno
    else:
        t = e.__traceback__
        while t is not None:
            f = _user_file(t.tb_frame.f_code.co_filename, roots)
            if f is not None:
                file, line = f, t.tb_lineno
            t = t.tb_next
    return {"name": name, "value": _cut(value, _MAX_TEXT), "traceback": _cut(text, _MAX_TEXT),
            "line": line, "file": file}


def _show(e):
    # What the interpreter does with an uncaught exception: remember it and
    # hand it to sys.excepthook (which the user may have replaced).
    sys.last_type, sys.last_value, sys.last_traceback = type(e), e, e.__traceback__
    if sys.version_info >= (3, 12):
        sys.last_exc = e
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    try:
        sys.excepthook(type(e), e, e.__traceback__)
    except BaseException:
        sys.__excepthook__(type(e), e, e.__traceback__)


def _exit_code(code):
    if code is None:
        return 0
    if isinstance(code, int):
        try:
            return int(code) & 0xFF
        except BaseException:
            return 1
    return 1


def _quiet_hook(*_):
    pass


def _main():
    fd, last, entry, args = _parse(sys.argv[1:])
    channel = _Channel(fd)
    report = {"result": None, "error": None, "exit_code": 0}
    roots = _user_roots(entry)
    cwd = os.getcwd()
    clean_path = [p for p in sys.path if p not in ("", cwd)]
    path = os.path.abspath(entry)

    # The interpreter's view of the program, as `python ENTRY ARGS...` sets it.
    _G["_driver_module"] = sys.modules["__main__"]  # keeps this namespace alive
    mod = type(sys)("__main__")
    g = mod.__dict__
    g["__file__"] = path
    g["__cached__"] = None
    g["__builtins__"] = sys.modules["builtins"]
    g["__loader__"] = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)
    sys.modules["__main__"] = mod
    if hasattr(sys, "orig_argv") and "-c" in sys.orig_argv:
        sys.orig_argv = sys.orig_argv[: sys.orig_argv.index("-c")] + [entry] + args
    sys.argv = [entry] + args
    if sys.path and sys.path[0] == "":
        del sys.path[0]
    if not getattr(sys.flags, "safe_path", False):
        sys.path.insert(0, os.path.dirname(os.path.realpath(entry)))
    try:
        sys.stdout.reconfigure(line_buffering=True)  # output reaches followers line by line
    except (AttributeError, ValueError):
        pass

    try:
        with open(path, "rb") as f:
            src = f.read()
    except OSError as e:
        sys.stderr.write("%s: can't open file %r: [Errno %s] %s\n"
                         % (os.path.basename(sys.executable) or "python3", path, e.errno, e.strerror))
        report["error"] = {"name": type(e).__name__, "value": str(e), "traceback": "", "line": None, "file": None}
        report["exit_code"] = 2
        channel.send(report)
        sys.exit(2)

    exc = None
    try:
        body, tail = _compile(src, path, last)
        exec(body, g)
        if tail is not None:
            value = eval(tail, g)
            if value is not None:
                r = repr(value)
                report["result"] = r[:_MAX_RESULT]
                if len(r) > _MAX_RESULT:
                    report["result_truncated"] = True
    except SystemExit as e:
        report["exit_code"] = _exit_code(e.code)
        channel.send(report)
        raise  # the interpreter prints a non-int code and exits as usual
    except BaseException as e:
        exc = e

    if exc is None:
        channel.send(report)
        return
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_globals is _G:
        tb = tb.tb_next
    exc.__traceback__ = tb
    report["error"] = _describe(exc, roots, clean_path)
    if isinstance(exc, KeyboardInterrupt):
        # Re-raised below so the interpreter dies of SIGINT as `python main.py` does.
        report["exit_code"] = 128 + 2
    else:
        report["exit_code"] = 1
    channel.send(report)
    _show(exc)
    if isinstance(exc, KeyboardInterrupt):
        sys.excepthook = _quiet_hook
        raise exc
    sys.exit(1)


_main()
