# pyexec runner driver.
#
# The jail starts this instead of the user's program, as
#     python -B -c <this source> --report-fd N [OPTIONS] -- ENTRY [ARGS...]
# OPTIONS: --eval-last-expr, --figure-format png|svg, --max-rows N,
# --dataframe NAME=PATH (repeatable).
# Warm: `python -B -c <this source> --wait-request N` starts ahead of its work
# and blocks on fd N; the request that arrives there holds the arguments
# above and environment additions (see _wait_request).
# `--wait-session N` waits for a session request on fd N first (_wait_session).
# Session: `python -B -c <this source> --session N [OPTIONS]` is a kernel: it
# reads cells from fd N (see _Cells), runs each in one persistent __main__
# (one flagged x is pyexec's snapshot.py, run apart) and, after each,
# writes b"\0pyexec-cell-end:NUM\0" to fds 1 and 2 and the cell's report
# (tagged "cell": NUM) on the channel.
# With PYEXEC_PRE_FAILED="I RC" in its environment (the engine's
# pre-command script sets it when pre-command I failed with RC) it writes
# "pyexec-pre-command-failed I RC" on the channel and exits RC instead.
# It runs ENTRY as __main__ the way `python ENTRY ARGS...` would. On a
# private copy of fd N it streams one JSON line per rich output
# ({"output": {"type", "data", "metadata"}}) as it happens and, at the end,
# one JSON line describing the outcome: the report, always the last line.
#
# Rules this file keeps:
# - It travels on argv, so it stays small (the Go side checks < 32 KiB).
# - It imports nothing before the user's code runs: only modules the
#   interpreter loaded at startup, so a user's json.py or random.py shadows the
#   standard library for the user exactly as with `python main.py`. The error
#   path imports traceback, and fetching a pipe from the jail's relay
#   _socket (a session's kernel before its first cell), both with the project
#   directory off sys.path. Rich output touches matplotlib and pandas only
#   when the user's code loaded them.
# - None of its frames appears in a traceback shown to the user.
# - In a jail, user code starts with fds 0-2 only: the channel and a
#   session's cell pipe are fetched from the jail's PID 1 for each use and
#   closed after it (see _relay; docs/jail.md). Started without a jail, it
#   keeps them as close-on-exec descriptors of its own.
# - It supports every CPython from 3.8.

import os
import sys

_G = globals()
_MAX_RESULT = 1 << 20  # characters of a result repr kept
_MAX_TEXT = 256 << 10  # characters of an error value or traceback kept
_MAX_OUTPUT = 4 << 20  # bytes of rich output per run (the jail keeps 8 MiB of the channel)
_MAX_RESULTS = 1 << 20  # bytes of the JSON of the results dict
_INF = float("inf")
_ESC = {i: "\\u%04x" % i for i in range(32)}
_ESC[ord('"')] = '\\"'
_ESC[ord("\\")] = "\\\\"


class _Raw(str):
    # Text that is already JSON.
    pass


def _json(v, depth=0):
    # JSON of plain data; anything else becomes what tolist() or to_dict()
    # make of it (numpy, pandas) or its str().
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if type(v) is _Raw:
        return str.__str__(v)
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float):
        return float.__repr__(v) if v == v and v != _INF and v != -_INF else "null"
    if isinstance(v, str):
        return '"' + v.translate(_ESC) + '"'
    if depth < 64:
        if isinstance(v, dict):
            return "{" + ",".join(_json(k if isinstance(k, str) else str(k)) + ":" + _json(x, depth + 1)
                                  for k, x in v.items()) + "}"
        if isinstance(v, (list, tuple, set, frozenset)):
            return "[" + ",".join(_json(x, depth + 1) for x in v) + "]"
        for name, args in (("tolist", ()), ("to_dict", ("records",))):
            if callable(getattr(type(v), name, None)):
                try:
                    return _json(getattr(v, name)(*args), depth + 1)
                except Exception:
                    pass
    try:
        return _json(str(v))
    except Exception:
        return '"<unprintable>"'


def _relay():
    # The jail's PID 1 serves the driver's pipes on a unix socket whose path
    # it puts in PYEXEC_RELAY: each connection gets them as close-on-exec
    # descriptors (b"c": the channel, b"r": the request pipe), which the
    # driver closes again after one use, so none is open while user code
    # runs. None when the jail gives them as fds 3 and 4 instead.
    return os.environ.pop("PYEXEC_RELAY", None)


_SOCKET = sys.modules.get("_socket")  # a fork server has it: its payloads import nothing


def _fetch(path, clean_path):
    # The pipes PID 1 hands out, as {b"c": fd, b"r": fd}; {} on failure.
    sock = _SOCKET or sys.modules.get("_socket") or _stdlib_import("_socket", clean_path)
    s = sock.socket(sock.AF_UNIX, sock.SOCK_STREAM | sock.SOCK_CLOEXEC)
    fds, msg = [], b""
    try:
        s.connect(path)
        msg, anc, _, _ = s.recvmsg(8, sock.CMSG_SPACE(8), getattr(sock, "MSG_CMSG_CLOEXEC", 0x40000000))
        for level, kind, data in anc:
            if level == sock.SOL_SOCKET and kind == sock.SCM_RIGHTS:
                fds += [int.from_bytes(data[i:i + 4], sys.byteorder) for i in range(0, len(data) - 3, 4)]
    except OSError:
        pass
    finally:
        s.close()
    if not fds or len(fds) != len(msg):
        for fd in fds:
            os.close(fd)
        return {}
    return {msg[i:i + 1]: fd for i, fd in enumerate(fds)}


class _Channel:
    # Where rich outputs and the report go. In a jail, a pipe fetched from
    # PID 1 for each send and closed after it (see _relay). Else the report
    # fd, moved off its well-known number before user code runs so that
    # children started by the user do not inherit it (os.dup returns a
    # close-on-exec fd); the user may close or reuse the number: the write
    # happens only if it still names the same pipe. Either way only in the
    # process that started (a fork()ed child returning into the driver
    # stays quiet).

    def __init__(self, fd, relay=None, clean_path=()):
        self.fd = -1
        self.pid = os.getpid()
        self.lock = sys.modules["_thread"].allocate_lock()  # display() may be called from threads
        self.relay, self.clean_path = relay, list(clean_path)
        if relay:
            return
        try:
            self.fd = os.dup(fd)
            os.close(fd)
            st = os.fstat(self.fd)
        except OSError:
            return  # no channel: run anyway, the caller uses the exit code
        self.ident = (st.st_dev, st.st_ino)

    def send(self, obj):
        # Returns the number of bytes written (0 when nothing was).
        if (self.fd < 0 and not self.relay) or os.getpid() != self.pid:
            return 0
        data = (_json(obj) + "\n").encode("utf-8", "backslashreplace")
        with self.lock:
            fds = {}
            try:
                if self.relay:
                    fds = _fetch(self.relay, self.clean_path)
                    fd = fds.get(b"c", -1)
                    if fd < 0:
                        return 0
                else:
                    fd = self.fd
                    st = os.fstat(fd)
                    if (st.st_dev, st.st_ino) != self.ident:
                        return 0
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            except OSError:
                return 0
            finally:
                for f in fds.values():
                    os.close(f)
        return len(data)


def _only_stdio(*keep):
    # User code starts with descriptors 0-2 and the driver's own (keep, each
    # close-on-exec): whatever else the process was started with is closed.
    lo = 3
    for fd in sorted(fd for fd in keep if fd >= 3):
        os.closerange(lo, fd)
        lo = fd + 1
    os.closerange(lo, max(os.sysconf("SC_OPEN_MAX"), lo))


def _usage(msg):
    sys.stderr.write("pyexec driver: %s\n" % msg)
    sys.exit(2)


class _Opts:
    fd = 3
    last = False
    figure = "png"
    rows = 100
    frames = ()


def _parse(argv, session=False):
    o, frames, i = _Opts(), [], 0
    while i < len(argv) and argv[i] != "--":
        a, v = argv[i], argv[i + 1] if i + 1 < len(argv) else ""
        if a == "--eval-last-expr":
            o.last, i = True, i + 1
            continue
        if a == "--report-fd" and v.isdigit():
            o.fd = int(v)
        elif a == "--figure-format" and v in ("png", "svg"):
            o.figure = v
        elif a == "--max-rows" and v.isdigit() and int(v) > 0:
            o.rows = int(v)
        elif a == "--dataframe" and v.partition("=")[0].isidentifier() and v.partition("=")[2]:
            frames.append(v.partition("="))
        else:
            _usage("bad option %r" % a)
        i += 2
    if session:
        if i < len(argv):
            _usage("a session takes no entry")
        argv = argv + ["--", ""]
    if i + 1 >= len(argv):
        _usage("missing -- ENTRY")
    if o.fd < 3:
        _usage("report fd must be 3 or more")
    o.frames = frames
    return o, argv[i + 1], argv[i + 2:]


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


_SOURCES = {}  # a session's cells: name -> source text


def _user_file(path, roots):
    # The user's name for path (relative to the workspace, roots[0]) when it
    # is the user's code; None for the driver, the stdlib and packages.
    if path in _SOURCES:
        return path
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


_REPRS = (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"),
          ("text/latex", "_repr_latex_"), ("image/svg+xml", "_repr_svg_"), ("image/png", "_repr_png_"),
          ("image/jpeg", "_repr_jpeg_"), ("application/json", "_repr_json_"))


def _kind(obj, module, *names):
    t = type(obj)
    return (t.__module__ or "").split(".")[0] == module and t.__name__ in names


class _Rich:
    # Rich outputs: MIME bundles streamed on the channel as they happen.

    def __init__(self, channel, opts, clean_path):
        self.channel, self.opts, self.clean_path = channel, opts, clean_path
        self.left, self.dropped = _MAX_OUTPUT, 0

    def emit(self, kind, data, meta=None):
        out = {"type": kind, "data": data}
        if meta:
            out["metadata"] = meta
        line = _json({"output": out})
        if len(line) >= self.left:
            self.dropped += 1
            return
        self.left -= self.channel.send(_Raw(line))

    def display(self, *objs, raw=False, metadata=None, **_ignored):
        # IPython's display(): one output per object, in order.
        for obj in objs:
            if raw and isinstance(obj, dict):
                self.emit("display", obj, metadata)
            else:
                data, meta = self.bundle(obj)
                self.emit("display", data, metadata or meta)

    def bundle(self, obj, text=None):
        data, meta = {}, {}
        if _kind(obj, "pandas", "DataFrame", "Series"):
            self.frame(obj, data)
        elif _kind(obj, "matplotlib", "Figure"):
            try:
                self.figure(obj, data)
            except Exception:
                pass
        else:
            r = self.call(obj, "_repr_mimebundle_")
            if isinstance(r, tuple) and len(r) == 2:
                r, m = r
                meta.update(m if isinstance(m, dict) else {})
            if isinstance(r, dict):
                data.update((k, v) for k, v in r.items() if isinstance(k, str))
            for mime, name in _REPRS:
                if mime in data:
                    continue
                r = self.call(obj, name)
                if isinstance(r, tuple) and len(r) == 2:
                    r, meta[mime] = r
                if r is None:
                    continue
                if isinstance(r, (bytes, bytearray)):
                    r = self.b64(r)
                data[mime] = r if mime == "application/json" else str(r)
        if "text/plain" not in data:
            data["text/plain"] = (repr(obj) if text is None else text)[:_MAX_RESULT]
        return data, meta

    def call(self, obj, name):
        # The method only when the class defines it: a __getattr__ that
        # answers every name does not make an object rich.
        if not callable(getattr(type(obj), name, None)):
            return None
        try:
            return getattr(obj, name)()
        except Exception:
            return None

    def b64(self, b):
        return _stdlib_import("binascii", self.clean_path).b2a_base64(bytes(b), newline=False).decode("ascii")

    def frame(self, obj, data):
        n = self.opts.rows
        df = obj.to_frame() if _kind(obj, "pandas", "Series") else obj
        try:
            data["text/html"] = df.to_html(max_rows=n, max_cols=100)
        except Exception:
            pass
        try:
            head = df.head(n)
            records = head.to_json(orient="records", date_format="iso", default_handler=str)
            data["application/json"] = {"columns": [str(c) for c in head.columns], "records": _Raw(records),
                                        "total_rows": len(df), "truncated": len(df) > n}
        except Exception:
            pass

    def figure(self, fig, data):
        buf = sys.modules["io"].BytesIO()
        kw = {"format": self.opts.figure}
        if kw["format"] == "png":
            kw["pil_kwargs"] = {"compress_level": 1}  # the same pixels, encoded in half the time of 6
        try:
            fig.savefig(buf, **kw)
        except TypeError:  # a matplotlib before 3.3 has no pil_kwargs
            buf = sys.modules["io"].BytesIO()
            fig.savefig(buf, format=self.opts.figure)
        b = buf.getvalue()
        if self.opts.figure == "svg":
            data["image/svg+xml"] = b.decode("utf-8", "replace")
        else:
            data["image/png"] = self.b64(b)

    def show_figures(self):
        # pyplot.show(): every open figure becomes an output and is closed,
        # as in a notebook.
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for num in plt.get_fignums():
            fig = plt.figure(num)
            try:
                data, meta = self.bundle(fig)
                self.emit("display", data, meta)
            finally:
                plt.close(fig)

    def find_spec(self, name, path, target=None):
        # A meta path finder that only patches pyplot.show as pyplot loads.
        if name != "matplotlib.pyplot":
            return None
        for f in sys.meta_path:
            spec = f.find_spec(name, path, target) if f is not self and hasattr(f, "find_spec") else None
            if spec is not None:
                break
        else:
            return None
        run = getattr(spec.loader, "exec_module", None)
        if run is not None:
            def exec_module(module):
                run(module)

                def show(*args, **kwargs):  # a function: pyplot sets its __signature__
                    self.show_figures()
                module.show = show
            spec.loader.exec_module = exec_module
        return spec

    def start(self):
        os.environ.setdefault("MPLBACKEND", "Agg")
        sys.meta_path.insert(0, self)
        b = sys.modules["builtins"]
        if not hasattr(b, "display"):
            b.display = self.display

    def load_frames(self, g):
        # The request's dataframes, loaded before the user's code runs.
        if self.opts.frames:
            try:
                pd = __import__("pandas")
            except ImportError as e:
                raise ImportError("dataframes need pandas, which this environment does not have: %s" % e)
            readers = {"csv": pd.read_csv, "tsv": lambda p: pd.read_csv(p, sep="\t"), "json": pd.read_json,
                       "parquet": pd.read_parquet, "xlsx": pd.read_excel}
            for name, _, path in self.opts.frames:
                ext = path.rpartition(".")[2].lower()
                if ext not in readers:
                    raise ValueError("cannot load %r as a DataFrame: unknown file type" % path)
                g[name] = readers[ext](path)

    def finish(self, report, g, want_results=True):
        try:
            self.show_figures()
        except Exception:
            pass
        res = g.get("results")
        if want_results and isinstance(res, dict):
            text = _json(res)
            if len(text) <= _MAX_RESULTS:
                report["results"] = _Raw(text)
            else:
                report["results_truncated"] = True
        if self.dropped:
            report["outputs_dropped"] = self.dropped


def _wait_request(fd):
    # The request: NUL-terminated fields, the number of arguments, the
    # arguments, then KEY=VALUE environment additions. No json: nothing may
    # be imported before the user's code runs.
    data = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(fd)
    fields = [os.fsdecode(f) for f in data.split(b"\0")[:-1]]
    if not fields or not fields[0].isdigit() or int(fields[0]) > len(fields) - 1:
        _usage("malformed request")
    n = int(fields[0])
    for kv in fields[1 + n:]:
        key, sep, value = kv.partition("=")
        if not key or not sep:
            _usage("malformed environment entry in the request")
        os.environ[key] = value
    return fields[1:1 + n]


def _wait_session(fd):
    # A kernel forked ahead of its session: b"LENGTH\n" then LENGTH bytes of
    # NUL-terminated fields: the number of arguments, the arguments after
    # "--session N", KEY=VALUE environment additions. Read exactly: the
    # cells follow on the same pipe.
    def read(n):
        b = b""
        while len(b) < n:
            c = os.read(fd, n - len(b))
            if not c:
                _usage("no session request")
            b += c
        return b
    head = b""
    while not head.endswith(b"\n"):
        head += read(1)
    fields = [os.fsdecode(f) for f in read(int(head)).split(b"\0")[:-1]]
    n = int(fields[0])
    for kv in fields[1 + n:]:
        key, _, value = kv.partition("=")
        os.environ[key] = value
    return ["--session", str(fd)] + fields[1:1 + n]


def _main():
    argv = sys.argv[1:]
    if argv[:1] == ["--wait-session"] and len(argv) == 2 and argv[1].isdigit():
        argv = _wait_session(int(argv[1]))
    if argv[:1] == ["--session"] and len(argv) >= 2 and argv[1].isdigit():
        return _Kernel(int(argv[1]), argv[2:]).serve()
    if argv[:1] == ["--wait-request"] and len(argv) == 2 and argv[1].isdigit():
        argv = _wait_request(int(argv[1]))
    opts, entry, args = _parse(argv)
    cwd = os.getcwd()
    clean_path = [p for p in sys.path if p not in ("", cwd)]
    channel = _Channel(opts.fd, _relay(), clean_path)
    _only_stdio(channel.fd)
    failed = os.environ.pop("PYEXEC_PRE_FAILED", "").split()
    if len(failed) == 2 and failed[0].isdigit() and failed[1].isdigit():
        # A pre-command failed (the engine's pre-command script): say which,
        # and end as it did, running no user code.
        channel.send(_Raw("pyexec-pre-command-failed %s %s" % tuple(failed)))
        sys.exit(int(failed[1]) & 0xFF)
    report = {"result": None, "error": None, "exit_code": 0}
    roots = _user_roots(entry)
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

    rich = _Rich(channel, opts, clean_path)
    rich.start()
    exc = None
    try:
        rich.load_frames(g)
        body, tail = _compile(src, path, opts.last)
        exec(body, g)
        if tail is not None:
            value = eval(tail, g)
            if value is not None:
                r = repr(value)
                report["result"] = r[:_MAX_RESULT]
                if len(r) > _MAX_RESULT:
                    report["result_truncated"] = True
                rich.emit("result", *rich.bundle(value, report["result"]))
    except SystemExit as e:
        report["exit_code"] = _exit_code(e.code)
        rich.finish(report, g)
        channel.send(report)
        raise  # the interpreter prints a non-int code and exits as usual
    except BaseException as e:
        exc = e

    rich.finish(report, g)
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


def _strip(tb):
    # The traceback without the driver's frames: those that led into the
    # user's code, and a SIGINT handler's frame at the end.
    while tb is not None and tb.tb_frame.f_globals is _G:
        tb = tb.tb_next
    nodes = []
    t = tb
    while t is not None:
        nodes.append(t)
        t = t.tb_next
    while len(nodes) > 1 and nodes[-1].tb_frame.f_globals is _G:
        nodes.pop()
        nodes[-1].tb_next = None
    return tb


class _Cells:
    # Cell frames on the request pipe: b"LENGTH NUMBER FLAGS\n" then LENGTH
    # bytes of UTF-8 source. FLAGS is "-" or letters: e = eval_last_expr.
    # In a jail the pipe is fetched from PID 1 for each cell and closed
    # before the cell runs (see _relay); else it is fd N, kept close-on-exec
    # so the user's children never see it.

    def __init__(self, fd, relay, clean_path):
        self.relay, self.clean_path = relay, clean_path
        self.fd = -1 if relay else os.dup(fd)
        os.close(fd)
        self.buf = bytearray()

    def need(self, fd, n):
        while len(self.buf) < n:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return False
            self.buf += chunk
        return True

    def next(self):
        if not self.relay:
            return self.frame(self.fd)
        fds = _fetch(self.relay, self.clean_path)
        try:
            return self.frame(fds[b"r"]) if b"r" in fds else None
        finally:
            for fd in fds.values():
                os.close(fd)

    def frame(self, fd):
        while b"\n" not in self.buf:
            if not self.need(fd, len(self.buf) + 1):
                return None
        head, _, rest = bytes(self.buf).partition(b"\n")
        self.buf = bytearray(rest)
        f = head.split(b" ")
        if len(f) != 3 or not f[0].isdigit() or not f[1].isdigit():
            _usage("malformed cell frame")
        if not self.need(fd, int(f[0])):
            return None
        src, self.buf = bytes(self.buf[:int(f[0])]), self.buf[int(f[0]):]
        return int(f[1]), f[2].decode("ascii", "replace"), src.decode("utf-8", "surrogateescape")


class _Kernel:
    # A session's interpreter: one __main__ for every cell.

    def __init__(self, fd, argv):
        self.opts = _parse(argv, session=True)[0]
        self.clean_path = [p for p in sys.path if p not in ("", os.getcwd())]
        relay = _relay()
        self.cells = _Cells(fd, relay, self.clean_path)
        self.channel = _Channel(self.opts.fd, relay, self.clean_path)
        _only_stdio(self.cells.fd, self.channel.fd)
        self.running = False
        self.roots = [os.path.realpath(os.getcwd())]
        _G["_driver_module"] = sys.modules["__main__"]
        mod = type(sys)("__main__")
        self.g = mod.__dict__
        self.g["__builtins__"] = sys.modules["builtins"]
        sys.modules["__main__"] = mod
        sys.argv = [""]
        self.rich = _Rich(self.channel, self.opts, self.clean_path)
        self.rich.start()
        sig = sys.modules["_signal"]
        sig.signal(sig.SIGINT, self.on_sigint)
        try:
            sys.stdout.reconfigure(line_buffering=True)
        except (AttributeError, ValueError):
            pass

    def on_sigint(self, *_):
        # An interrupt is for the running cell; one that arrives between
        # cells raced with the cell's end and is dropped.
        if self.running:
            raise KeyboardInterrupt

    def serve(self):
        while True:
            cell = self.cells.next()
            if cell is None:
                return
            self.run(*cell)

    def run(self, num, flags, src):
        # Flag x: pyexec's own code (snapshot.py), run in a namespace of its own.
        name, own = "<cell-%d>" % num, "x" in flags
        report = {"cell": num, "result": None, "error": None, "exit_code": 0}
        rich, g = self.rich, self.g
        if own:
            g = {"__name__": "pyexec_snapshot", "_kernel": self, "_driver": _G}
        else:
            _SOURCES[name] = src
        rich.left, rich.dropped = _MAX_OUTPUT, 0
        exc, names = None, ()
        try:
            try:
                body, tail = _compile(src, name, "e" in flags)
                names = body.co_names
                self.running = True
                exec(body, g)
                if tail is not None:
                    value = eval(tail, g)
                    if value is not None:
                        r = repr(value)
                        report["result"] = r[:_MAX_RESULT]
                        if len(r) > _MAX_RESULT:
                            report["result_truncated"] = True
                        rich.emit("result", *rich.bundle(value, report["result"]))
            finally:
                self.running = False
        except SystemExit as e:
            report["exit_code"] = _exit_code(e.code)
        except BaseException as e:
            exc = e
        if not own:
            rich.finish(report, g, "results" in names)
        if exc is not None:
            exc.__traceback__ = _strip(exc.__traceback__)
            self.lines()
            report["error"] = _describe(exc, self.roots, self.clean_path)
            report["exit_code"] = 130 if isinstance(exc, KeyboardInterrupt) else 1
            if sys.excepthook is sys.__excepthook__:
                try:
                    sys.stderr.write(report["error"]["traceback"])
                except BaseException:
                    pass
            else:
                _show(exc)
        self.end(num, report)

    def lines(self):
        # Cell sources for tracebacks (and inspect), as IPython does.
        try:
            cache = _stdlib_import("linecache", self.clean_path).cache
            for name, src in _SOURCES.items():
                cache[name] = (len(src), None, src.splitlines(True), name)
        except BaseException:
            pass

    def end(self, num, report):
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except BaseException:
                pass
        mark = b"\0pyexec-cell-end:%d\0" % num
        for fd in (1, 2):
            try:
                os.write(fd, mark)
            except OSError:
                pass
        self.channel.send(report)


if __name__ == "__main__":  # a fork server loads this once and calls _main per execution
    _main()
