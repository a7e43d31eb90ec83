# pyexec fork server: copying ahead the pages executions write.
#
# Definitions only, run before forkserver.py in the same program (see
# ForkServerArgv): they use that file's globals when called.
#
# A forked execution shares the fork server's heap copy-on-write: whatever
# its request then writes there (reference counts, allocator state, caches
# of the preloaded libraries) is copied a page at a time, one fault each,
# on the request's path. A fork server with preloads learns once, at its
# start, which pages those are: it forks a probe that does what executions
# of such modules do and then lists the pages it made its own. Each
# execution copies them (MADV_POPULATE_WRITE) while it waits for its
# request. The probe takes no input and runs no request's code, but the
# environment's libraries, with an execution's credentials and seccomp
# filter (_probe_confine): all it can change is that list, which only
# decides what an execution copies ahead, within its own memory.

MADV_POPULATE_WRITE = 23  # Linux 5.14
# Bounds of the list: ranges, and bytes an execution may copy (a fraction
# of its memory limit decides for each execution, see _precopy).
_PROBE_MAX_RANGES = 4096
_PROBE_MAX_BYTES = 256 << 20
# Pages apart that still make one range: a copy of a page nobody writes
# costs memory, each range an madvise call. Bridging gaps of 1-16 pages
# copied 3-28 MiB more for the pandas server and saved no faults.
_PROBE_GAP_PAGES = 0
# What an execution with preloads typically does, per module; each step is
# on its own (a library whose API differs just warms less).
_PROBE_WORK = (
    ("numpy", "a = np.arange(4000.0).reshape(1000, 4)\n"
              "out(repr(a.mean(axis=0)), str(a[:3]), a.std(), np.cumsum(a, axis=0)[-1])\n"),
    ("pandas", "df = pd.DataFrame({'a': range(200), 'b': [i * 0.5 for i in range(200)], 'c': list('xyz' * 66) + ['x', 'y']})\n"
               "out(df.describe(), df.head(), df.groupby('c').sum(), df.dtypes)\n"
               "rich.display(df)\n"),
    ("matplotlib.pyplot", "plt.plot([0.0, 1.0, 0.5], label='line')\nplt.legend()\nplt.title('t')\nrich.show_figures()\n"),
    ("pandas+matplotlib.pyplot", "df.cumsum().plot()\nrich.show_figures()\n"),
)


def _probe(timeout, cfg):
    # The ranges an execution of this server writes, as [(address,
    # length)], and "" — or [] and why not. cfg is the server's
    # configuration: the probe drops to an execution's credentials.
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError as e:
        os.close(r)
        os.close(w)
        return [], "fork: %s" % e
    if pid == 0:
        _probe_child(w, cfg)  # never returns
    os.close(w)
    data, why = bytearray(), ""
    limit = 16 * (_PROBE_MAX_RANGES + 1)
    deadline = _time() + timeout
    try:
        while True:
            left = deadline - _time()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                why = "the probe took longer than %gs" % timeout
                break
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            data += chunk
            if len(data) > limit:
                why = "the probe listed too many ranges"
                break
    finally:
        os.close(r)
        if why:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _, status = os.waitpid(pid, 0)
    if not why and status != 0:
        why = "the probe failed (status %d)" % status
    if not why and len(data) % 16:
        why = "the probe's list is cut short"
    if why:
        return [], why
    ranges = list(struct.iter_unpack("QQ", bytes(data)))
    if sum(n for _, n in ranges) > _PROBE_MAX_BYTES:
        return [], "the probe listed more than %d bytes" % _PROBE_MAX_BYTES
    return ranges, ""


def _time():
    return os.times().elapsed


def _probe_child(w, cfg):
    code = 1
    try:
        # Nothing of the server's but the list's pipe, stdout and stderr
        # (its log); it dies with the server.
        for fd in [int(f) for f in os.listdir("/proc/self/fd")]:
            if fd not in (1, 2, w):
                try:
                    os.close(fd)
                except OSError:
                    pass
        _prctl("pdeathsig", PR_SET_PDEATHSIG, signal.SIGKILL)
        maps = _writable_mappings()
        # Opened while the probe may (pagemap is its owner's alone once
        # the uid changes); read after the work.
        pagemap = os.open("/proc/self/pagemap", os.O_RDONLY)
        _probe_confine(cfg)
        _probe_work()
        os.write(w, b"".join(struct.pack("QQ", a, n) for a, n in _touched(maps, pagemap)))
        code = 0
    except BaseException as e:
        try:
            sys.stderr.write("pyexec fork server: probe: %s: %s\n" % (type(e).__name__, e))
        except BaseException:
            pass
    os._exit(code)


def _probe_confine(cfg):
    # The libraries the probe drives are the environment's, which a
    # request's requirements may have chosen: they run with what an
    # execution has (its uid and gid, no capabilities, no_new_privs, its
    # seccomp filter), not with the fork server's privileges. Its mounts
    # and namespaces stay the server's: it only reads and computes. The
    # payload's own steps (forkserver.py), without Landlock.
    _become_user(cfg)
    _seal(cfg)


def _writable_mappings():
    # [(start, end)] of the private writable mappings: what a write copies.
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 2 or fields[1][1] != "w" or fields[1][3] != "p":
                continue
            start, _, end = fields[0].partition("-")
            out.append((int(start, 16), int(end, 16)))
    return out


def _probe_work():
    # What an execution does before and around its user code: the payload's
    # own start (_fresh_state, _warm), then each preloaded module used as
    # user code uses it, with rich outputs through the driver's own path
    # (a channel that leads nowhere).
    _fresh_state()
    _warm((), 0)
    d = _DRIVER_MODULE
    rich = d._Rich(d._Channel(3, "/", []), d._Opts(), [])
    sink = sys.modules["io"].StringIO()

    def out(*objs):
        print(*objs, file=sink)

    g = {"__name__": "__main__", "out": out, "rich": rich, "np": sys.modules.get("numpy"),
         "pd": sys.modules.get("pandas"), "plt": sys.modules.get("matplotlib.pyplot")}
    for needs, src in _PROBE_WORK:
        if all(m in sys.modules for m in needs.split("+")):
            try:
                exec(d._compile(src, "<probe>", False)[0], g)
            except Exception:
                pass  # another version of the library: this step warms less
    gc.collect()


def _touched(maps, fd):
    # The pages of maps now present and mapped by this process alone
    # (/proc/self/pagemap, open as fd: bits 63 and 56), i.e. copied or
    # first touched since the fork, as ranges that bridge gaps of
    # _PROBE_GAP_PAGES. It closes fd.
    page = resource.getpagesize()
    present_alone = (1 << 63) | (1 << 56)
    ranges = []
    try:
        for start, end in maps:
            first = start // page
            raw = os.pread(fd, 8 * (end - start) // page, 8 * first)
            run = None  # [first page, last page] of the range being built
            for i, e in enumerate(memoryview(raw).cast("Q")):
                if e & present_alone != present_alone:
                    continue
                if run is not None and i - run[1] <= _PROBE_GAP_PAGES + 1:
                    run[1] = i
                    continue
                if run is not None:
                    ranges.append((start + run[0] * page, (run[1] - run[0] + 1) * page))
                run = [i, i]
            if run is not None:
                ranges.append((start + run[0] * page, (run[1] - run[0] + 1) * page))
            if len(ranges) > _PROBE_MAX_RANGES:
                raise OverflowError("more than %d ranges" % _PROBE_MAX_RANGES)
    finally:
        os.close(fd)
    return ranges


def _precopy(ranges, budget):
    # In a payload waiting for its request: copy the pages of ranges now,
    # unless they would take more than budget bytes. A kernel without
    # MADV_POPULATE_WRITE (EINVAL), a range no longer mapped, or any
    # exception ends it: this is only speed, never the execution's end.
    if not ranges or sum(n for _, n in ranges) > budget:
        return
    try:
        madvise = _libc.madvise
        madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        for addr, n in ranges:
            if madvise(addr, n, MADV_POPULATE_WRITE) != 0:
                return
    except Exception:
        pass
