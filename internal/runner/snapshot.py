# pyexec session snapshots: the kernel's half.
#
# The server sends this file to a session's kernel as a cell flagged x
# (runner.SaveRequest, runner.LoadRequest): the driver runs it in a
# namespace of its own with _kernel (the driver's _Kernel) and _driver (the
# driver's globals) set, and the server's last line calls one of
#
#   _save()   writes the state of __main__ on the channel: one JSON line
#               {"snapshot": {"bytes": N, "saved": [NAME, ...],
#                             "skipped": [{"name": NAME, "reason": WHY}, ...]}}
#             then N bytes of state: b"PYEXSTATE1 TAG N0 N1 ...\n", the
#             pickle (N0 bytes) and each out-of-band buffer (N1, ...), TAG
#             the interpreter's sys.implementation.cache_tag;
#   _load(N)  reads N bytes of state, as _save wrote them, from the request
#             pipe right after this cell's frame, loads them into __main__
#             and writes one line on the channel
#               {"snapshot_loaded": {"names": [...], "skipped": [...]}}.
#
# What is saved: the variables of __main__. Modules by name (imported again
# on load, so a module is as the new interpreter has it: a monkey-patch is
# not carried); functions and classes made in cells by value (code,
# defaults, closures, class dictionaries; their globals are the restored
# __main__ itself); everything else as pickle's protocol 5 saves it, large
# buffers (numpy, pandas) out of band: written from the arrays' memory and
# read into the new arrays' memory, never copied in between. Also the
# cells' sources (tracebacks, inspect), the working directory and sys.path.
# A variable that cannot be saved (a thread, a socket, a lock, a generator,
# an open file, whatever pickle refuses) is left out and named, with the
# reason; so is one that cannot be loaded (a module the new environment
# lacks). Not saved: the state inside imported modules, threads, open files,
# environment variables, random generators' state.
#
# Loading runs code (pickle calls what the stream names). It runs only in a
# session of the snapshot's owner, in a jail made as for any new session,
# after all of its confinement: it can do what a cell of that owner can do
# (docs/sessions.md, "How a snapshot is made").

import os
import sys

_MAGIC = b"PYEXSTATE1"
_NOT_STATE = frozenset(("__name__", "__doc__", "__package__", "__loader__", "__spec__", "__builtins__",
                        "__file__", "__cached__"))
_stdlib = _driver["_stdlib_import"]  # noqa: F821 -- set by the driver
_pickle = _stdlib("_pickle", _kernel.clean_path)  # noqa: F821
_marshal = _stdlib("marshal", _kernel.clean_path)  # noqa: F821
_io = sys.modules["io"]
_FunctionType = type(lambda: 0)
_CodeType = type((lambda: 0).__code__)
_CellType = type((lambda x: lambda: x)(0).__closure__[0])
_ModuleType = type(sys)
_MappingProxy = type(type.__dict__)
_Enum = _stdlib("enum", _kernel.clean_path).Enum  # noqa: F821
_MemberType = type(type.__dict__["__dict__"]), type(_FunctionType.__dict__["__closure__"])
_LOST = object()
_TARGET = {}  # while loading: the __main__ the state goes into
_TAG = sys.implementation.cache_tag or sys.implementation.name


class _Skip(Exception):
    # A value that cannot be saved, with the reason the user reads.
    pass


class _Var:
    # One variable of __main__ while it is saved: the saver notes whose
    # value it is saving, so that a failure names the variable.
    __slots__ = ("name", "value")

    def __init__(self, name, value):
        self.name, self.value = name, value


def _text(e):
    s = "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__
    return s if len(s) <= 300 else s[:300] + "..."


# --- what the stream calls on load ----------------------------------------

def _value(v):
    return v


def _import(name):
    try:
        __import__(name)
        return sys.modules[name]
    except Exception as e:
        return _missing("module %s" % name, e)


def _make_function(code, glob, name, ncells):
    cells = tuple(_CellType() for _ in range(ncells)) or None
    if glob is None:
        glob = _TARGET
    else:
        glob.setdefault("__builtins__", sys.modules["builtins"])  # not saved: the interpreter's own
    return _FunctionType(code, glob, name, None, cells)


def _set_function(f, state):
    for cell, v in zip(f.__closure__ or (), state.pop("cells")):
        if v:
            cell.cell_contents = v[0]
    for key, v in state.items():
        try:
            setattr(f, key, v)
        except (AttributeError, TypeError, ValueError):
            pass


def _make_class(meta, name, bases, ns):
    try:
        return meta(name, bases, ns)
    except Exception as e:
        return _missing("class %s" % name, e)


def _make_enum(base, name, qualname, members, mixin):
    try:
        kw = {"type": mixin} if mixin is not None else {}
        return base(name, members, module="__main__", qualname=qualname, **kw)
    except Exception as e:
        return _missing("enum %s" % name, e)


def _set_class(cls, attrs):
    if issubclass(cls, _Missing):
        return
    for key, v in attrs:
        try:
            setattr(cls, key, v)
        except (AttributeError, TypeError):
            pass
    for key, v in attrs:  # as type() does: descriptors learn their name
        hook = getattr(type(v), "__set_name__", None)
        if hook is not None:
            try:
                hook(v, cls, key)
            except Exception:
                pass


def _make_cell():
    return _CellType()


def _set_cell(cell, v):
    if v:
        cell.cell_contents = v[0]


def _proxy(d):
    return _MappingProxy(d)


def _lru_cache(f, maxsize, typed):
    return _stdlib("functools", _kernel.clean_path).lru_cache(maxsize, typed)(f)  # noqa: F821


class _Missing:
    # What stands for a class, module or function the new interpreter
    # cannot find; a variable holding one is reported, not restored.
    reason = ""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass

    def __call__(self, *args, **kwargs):
        return self


def _missing(what, e):
    return type("Missing", (_Missing,), {"reason": "%s cannot be loaded: %s" % (what, _text(e))})


def _missing_reason(v):
    if isinstance(v, _Missing) or (isinstance(v, type) and issubclass(v, _Missing)):
        return v.reason
    return None


_HELPERS = {f.__name__: f for f in (_value, _import, _make_function, _set_function, _make_class, _set_class,
                                    _make_cell, _set_cell, _lru_cache, _proxy, _make_enum)}


# --- saving ----------------------------------------------------------------

def _lookup(obj):
    # Whether pickle can save obj by reference: its module, once imported,
    # holds it under its qualified name. Never for what cells made.
    mod, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(mod, str) or not isinstance(name, str) or mod == "__main__" or "<locals>" in name:
        return False
    o = sys.modules.get(mod)
    for part in name.split("."):
        o = getattr(o, part, _LOST)
    return o is obj


def _names(code, out):
    # The global names code and the code nested in it use.
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, _CodeType):
            _names(c, out)
    return out


def _function(p, f):
    if _lookup(f):
        return NotImplemented
    if f.__globals__ is p.main:
        glob = None
    else:
        # Another module's function that pickle cannot find by name: the
        # globals it uses, shared by the functions of that module.
        glob = p.globs.get(id(f.__globals__))
        if glob is None:
            glob = p.globs[id(f.__globals__)] = {"__name__": f.__globals__.get("__name__")}
        for k in _names(f.__code__, set()):
            if k in f.__globals__ and k != "__builtins__":
                glob[k] = f.__globals__[k]
    state = {"__defaults__": f.__defaults__, "__kwdefaults__": f.__kwdefaults__, "__dict__": f.__dict__,
             "__qualname__": f.__qualname__, "__module__": f.__module__, "__doc__": f.__doc__}
    try:
        state["__annotations__"] = f.__annotations__
    except Exception:
        pass
    state["cells"] = [_contents(c) for c in f.__closure__ or ()]
    return _make_function, (f.__code__, glob, f.__name__, len(f.__closure__ or ())), state, None, None, _set_function


def _contents(cell):
    try:
        return (cell.cell_contents,)
    except ValueError:
        return ()


def _class(p, c):
    if _lookup(c):
        return NotImplemented
    meta = type(c)
    if any(getattr(b, "__module__", "") == "enum" for b in meta.__mro__):
        return _enum(c)
    d = c.__dict__
    ns = {"__module__": c.__module__, "__qualname__": c.__qualname__, "__doc__": d.get("__doc__")}
    if "__slots__" in d:
        ns["__slots__"] = d["__slots__"]
    attrs = []
    for k, v in d.items():
        if k in ns or k in ("_abc_impl", "__weakref__", "__dict__"):
            continue
        if isinstance(v, _MemberType) and getattr(v, "__objclass__", None) is c:
            continue  # made again by type() from __slots__
        attrs.append((k, v))
    return _make_class, (meta, c.__name__, c.__bases__, ns), attrs, None, None, _set_class


def _enum(c):
    # An Enum made in a cell: made again through the functional API from
    # its members (aliases included), with the methods its body defined.
    bases = [b for b in c.__bases__ if issubclass(b, _Enum)]
    mixins = [b for b in c.__bases__ if not issubclass(b, _Enum)]
    if len(bases) != 1 or len(mixins) > 1:
        raise _Skip("an Enum with more than one base cannot be saved")
    members = [(k, m._value_) for k, m in c.__members__.items()]
    attrs = [(k, v) for k, v in c.__dict__.items()
             if k not in c.__members__ and not (k.startswith("_") and k.endswith("_"))
             and isinstance(v, (_FunctionType, property, classmethod, staticmethod))]
    return _make_enum, (bases[0], c.__name__, c.__qualname__, members, mixins[0] if mixins else None), attrs, None, \
        None, _set_class


def _module(p, m):
    name = getattr(m, "__name__", None)
    if not isinstance(name, str) or sys.modules.get(name) is not m:
        raise _Skip("a module made at run time: it cannot be imported by name")
    return _import, (name,)


def _code(p, c):
    return _marshal.loads, (_marshal.dumps(c),)


def _cell(p, c):
    return _make_cell, (), _contents(c), None, None, _set_cell


def _var(p, v):
    p.current = v.name
    return _value, (v.value,)


def _wrapper(p, w):
    # property, classmethod, staticmethod: made again from what they wrap.
    if type(w) is property:
        return property, (w.fget, w.fset, w.fdel, w.__doc__)
    return type(w), (w.__func__,)


def _cached(p, w):
    if _lookup(w):
        return NotImplemented
    if type(w).__name__ == "cached_property":
        return type(w), (w.func,)
    if hasattr(w, "cache_parameters"):
        info = w.cache_parameters()
        return _lru_cache, (w.__wrapped__, info["maxsize"], info["typed"])
    return _lru_cache, (w.__wrapped__, w.cache_info().maxsize, False)  # 3.8 does not say


def _sentinel(name):
    # dataclasses' markers are compared by identity: the module's own.
    def reduce(p, obj):
        return getattr, (sys.modules["dataclasses"], name)
    return reduce


def _refuse(reason):
    def reduce(p, obj):
        raise _Skip(reason)
    reduce.reason = reason
    return reduce


# Types by (module, qualified name), looked up along the MRO.
_BY_NAME = {
    ("builtins", "generator"): _refuse("a generator: its paused frame cannot be saved"),
    ("builtins", "coroutine"): _refuse("a coroutine: its paused frame cannot be saved"),
    ("builtins", "async_generator"): _refuse("an async generator: its paused frame cannot be saved"),
    ("builtins", "frame"): _refuse("a frame cannot be saved"),
    ("_thread", "lock"): _refuse("a lock cannot be saved"),
    ("_thread", "RLock"): _refuse("a lock cannot be saved"),
    ("threading", "Thread"): _refuse("a thread: threads do not survive a snapshot"),
    ("_socket", "socket"): _refuse("an open socket cannot be saved"),
    ("_io", "FileIO"): _refuse("an open file cannot be saved"),
    ("_io", "BufferedReader"): _refuse("an open file cannot be saved"),
    ("_io", "BufferedWriter"): _refuse("an open file cannot be saved"),
    ("_io", "BufferedRandom"): _refuse("an open file cannot be saved"),
    ("_io", "TextIOWrapper"): _refuse("an open file cannot be saved"),
    ("mmap", "mmap"): _refuse("a memory map cannot be saved"),
    ("select", "epoll"): _refuse("an epoll object cannot be saved"),
    ("subprocess", "Popen"): _refuse("a child process cannot be saved"),
    ("builtins", "property"): _wrapper,
    ("builtins", "classmethod"): _wrapper,
    ("builtins", "staticmethod"): _wrapper,
    ("functools", "_lru_cache_wrapper"): _cached,
    ("functools", "cached_property"): _cached,
    ("dataclasses", "_MISSING_TYPE"): _sentinel("MISSING"),
    ("dataclasses", "_HAS_DEFAULT_FACTORY_CLASS"): _sentinel("_HAS_DEFAULT_FACTORY"),
    ("dataclasses", "_KW_ONLY_TYPE"): _sentinel("KW_ONLY"),
}


def _kind(t):
    # How values of type t are saved: a function of (saver, value), or
    # None for pickle's own way.
    if t is _FunctionType:
        return _function
    if issubclass(t, type):
        return _class
    if issubclass(t, _ModuleType):
        return _module
    if t is _CodeType:
        return _code
    if t is _CellType:
        return _cell
    if t is _Var:
        return _var
    if t is _MappingProxy:
        return lambda p, d: (_proxy, (dict(d),))
    if t.__module__ == "dataclasses" and t.__name__ == "_FIELD_BASE":
        return lambda p, f: (getattr, (sys.modules["dataclasses"], f.name))
    for base in t.__mro__:
        k = _BY_NAME.get((base.__module__, base.__qualname__))
        if k is not None:
            return k
    return None


class _Saver(_pickle.Pickler):
    def __init__(self, file, main, buffers):
        _pickle.Pickler.__init__(self, file, 5, buffer_callback=buffers.append)
        self.main, self.current, self.kinds, self.globs = main, None, {}, {}

    def reducer_override(self, obj):
        t = type(obj)
        try:
            k = self.kinds[t]
        except KeyError:
            k = self.kinds[t] = _kind(t)
        except TypeError:  # an unhashable metaclass
            k = _kind(t)
        return NotImplemented if k is None else k(self, obj)


def _pickled(g, names, skipped):
    # The pickle of the settings and of every variable that saves, and the
    # out-of-band buffers; a variable that fails is added to skipped and
    # the whole is pickled again without it.
    settings = {"sources": dict(_driver["_SOURCES"]), "cwd": os.getcwd(),  # noqa: F821
                "path": [p for p in sys.path if isinstance(p, str)]}
    while True:
        buffers, out = [], _io.BytesIO()
        p = _Saver(out, g, buffers)
        try:
            p.dump(settings)  # the memo goes on: the loader's does too
            p.dump({n: _Var(n, g[n]) for n in names if n not in skipped})
            return out, buffers
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            if p.current is None or p.current in skipped:
                raise
            skipped[p.current] = ("too deeply nested to be saved" if isinstance(e, RecursionError) else
                                  str(e) if isinstance(e, _Skip) else "cannot be saved: " + _text(e))


def _register():
    # The stream names the load helpers as pyexec_snapshot.NAME: pickle
    # finds them there while it saves.
    m = _ModuleType(__name__)
    m.__dict__.update(globals())
    prev = sys.modules.get(__name__)
    sys.modules[__name__] = m
    return prev


def _save():
    k = _kernel  # noqa: F821
    g = k.g
    names = [n for n in g if isinstance(n, str) and n not in _NOT_STATE]
    # What is refused by its type alone is left out before pickling; what
    # fails deeper costs one more pass (_pickled).
    skipped = {n: getattr(_kind(type(g[n])), "reason", None) for n in names}
    skipped = {n: why for n, why in skipped.items() if why}
    prev = _register()
    try:
        out, buffers = _pickled(g, names, skipped)
    finally:
        if prev is None:
            del sys.modules[__name__]
        else:
            sys.modules[__name__] = prev
    parts = [out.getbuffer()] + [b.raw() for b in buffers]
    index = ("%s %s %s\n" % (_MAGIC.decode(), _TAG, " ".join(str(v.nbytes) for v in parts))).encode()
    meta = {"bytes": len(index) + sum(v.nbytes for v in parts), "saved": [n for n in names if n not in skipped],
            "skipped": [{"name": n, "reason": r} for n, r in skipped.items()]}
    head = (_driver["_json"]({"snapshot": meta}) + "\n").encode()  # noqa: F821
    # Not interruptible from here: the server counts the bytes announced.
    k.running = False
    with k.channel.lock:
        fd, close = _pipe(k.channel.relay, b"c", k.channel.fd)
        try:
            for v in [head, index] + parts:
                v = memoryview(v).cast("B")
                while v:
                    v = v[os.write(fd, v):]
        finally:
            if close:
                os.close(fd)


def _pipe(relay, tag, fd):
    # The kernel's channel (b"c") or request pipe (b"r"): fetched from the
    # jail's PID 1 when it serves them (closed after use), else its own.
    if not relay:
        return fd, False
    fds = _driver["_fetch"](relay, _kernel.clean_path)  # noqa: F821
    mine = fds.pop(tag, -1)
    for other in fds.values():
        os.close(other)
    if mine < 0:
        raise OSError("the jail's relay did not hand out the pipe")
    return mine, True


# --- loading ----------------------------------------------------------------

class _Loader(_pickle.Unpickler):
    def find_class(self, module, name):
        if module == "pyexec_snapshot":
            return _HELPERS[name]
        try:
            return _pickle.Unpickler.find_class(self, module, name)
        except Exception as e:
            return _missing("%s.%s" % (module, name), e)


class _Input:
    # Exactly n bytes of the request pipe: first what the driver read
    # ahead past the frame, then the pipe.

    def __init__(self, cells, n):
        self.cells, self.left = cells, n
        self.fd, self.close = _pipe(cells.relay, b"r", cells.fd)

    def into(self, buf):
        view, ahead = memoryview(buf).cast("B"), self.cells.buf
        if len(view) > self.left:
            raise ValueError("the state is shorter than its index says")
        self.left -= len(view)
        take = min(len(ahead), len(view))
        view[:take] = ahead[:take]
        del ahead[:take]
        view = view[take:]
        while view:
            n = os.readv(self.fd, [view])
            if n == 0:
                raise EOFError("the request pipe closed in the middle of the state")
            view = view[n:]
        return buf

    def line(self, limit):
        out = bytearray()
        one = bytearray(1)
        while not out.endswith(b"\n"):
            if len(out) >= limit or self.left == 0:
                raise ValueError("the state has no index")
            out += self.into(one)
        return bytes(out)

    def drain(self):
        chunk = bytearray(1 << 20)
        while self.left:
            self.into(memoryview(chunk)[:min(self.left, len(chunk))])

    def done(self):
        if self.close:
            os.close(self.fd)


_HUGE = 2 << 20  # a transparent huge page on x86-64 and arm64 (4 KiB pages)


def _buffer(size):
    # The memory an out-of-band buffer is read into. A large one is an
    # anonymous private map asked for transparent huge pages, which the
    # kernel gives then even in its madvise mode: the load faults its
    # memory in 2 MiB at a time instead of 4 KiB, and pays each fault's
    # fixed cost (the memory cgroup's charge among it) 512 times less
    # often. Its length is rounded up
    # to whole huge pages, which recent kernels align on one; only the
    # whole huge pages within size are asked for, so the pages past size
    # are never touched nor charged. Without huge pages (THP off, an old
    # interpreter) it is memory as before.
    if size < _HUGE:
        return bytearray(size)
    mmap = _stdlib("mmap", _kernel.clean_path)  # noqa: F821
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is None or not hasattr(mmap.mmap, "madvise"):
        return bytearray(size)
    m = mmap.mmap(-1, -(-size // _HUGE) * _HUGE, flags=mmap.MAP_PRIVATE)
    try:
        m.madvise(advice, 0, size // _HUGE * _HUGE)
    except OSError:
        pass
    # What the unpickled object holds (numpy's array as its base): a
    # buffer of exactly size bytes, which pickles again, out of band.
    return _pickle.PickleBuffer(memoryview(m)[:size])


def _load(n):
    k = _kernel  # noqa: F821
    k.running = False  # the whole state is read before anything may interrupt
    src = _Input(k.cells, n)
    try:
        try:
            head = src.line(4096).split()
            if len(head) < 3 or head[0] != _MAGIC or not all(f.isdigit() for f in head[2:]):
                raise ValueError("not a pyexec state")
            sizes = [int(f) for f in head[2:]]
            if sum(sizes) != src.left:
                raise ValueError("the state's index does not match its size")
            data = [src.into(bytearray(sizes[0]))] + [src.into(_buffer(s)) for s in sizes[1:]]
        finally:
            src.drain()  # whatever happens, the next frame starts where it should
    finally:
        src.done()
    if head[1].decode() != _TAG:
        raise ValueError("the state was saved by %s; this session runs %s" % (head[1].decode(), _TAG))
    global _TARGET
    g = _TARGET = k.g
    k.running = True
    loader = _Loader(_io.BytesIO(data[0]), buffers=data[1:])
    settings = loader.load()
    _settle(settings)
    values = loader.load()
    names, skipped = [], []
    for name, v in values.items():
        why = _missing_reason(v)
        if why is None:
            g[name] = v
            names.append(name)
        else:
            skipped.append({"name": name, "reason": why})
    k.running = False
    k.channel.send({"snapshot_loaded": {"names": names, "skipped": skipped}})


def _settle(s):
    # Where the saved session worked: its cells' sources, its directory,
    # the entries it added to sys.path (imports of its own modules need them).
    _driver["_SOURCES"].update(s["sources"])  # noqa: F821
    try:
        os.chdir(s["cwd"])
    except OSError:
        pass
    for i, p in enumerate(s["path"]):
        if p not in sys.path:
            sys.path.insert(min(i, len(sys.path)), p)
