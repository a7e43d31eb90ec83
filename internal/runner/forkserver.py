# pyexec fork server.
#
# A jail's init starts this as
#     python -B -c <boot> [--lean] [MODULE ...]
# (the boot, runner.ForkServerArgv, reads this source and the driver's on
# stdin and runs this with the driver's as _DRIVER)
# as uid 0 holding only SYS_ADMIN, SETUID, SETGID, SETPCAP, KILL and
# NET_ADMIN, with no_new_privs, and a SOCK_SEQPACKET socket to the server on
# fd 4. It imports MODULEs (those the environment has; with --lean none, for
# code that needs only the standard library) and the commonest of the
# standard library (stdlibready.py) once, reads its configuration, answers {"ready": true, "preloads": [the MODULEs the environment has]},
# and then forks one execution per request. It never runs user code itself. Each child, before any user code:
#   - becomes PID 1 (the reaper) of a new pid namespace, with new mount, IPC,
#     UTS and network namespaces (only its loopback; with network, the
#     server attaches the execution's egress to it at hand-off), fresh tmpfs
#     /work, /tmp and /dev/shm, and a new /proc masked like a cold jail's;
#     once the server has moved it into the execution's cgroup, a new cgroup
#     namespace rooted there;
#   - holds the execution's result channel and request pipe itself and
#     hands them out on a unix socket in its /dev/shm (the relay, see
#     sandbox/relay_linux.go), so that the payload holds none while user
#     code runs;
#   - forks the payload, which takes a session, rlimits, an empty bounding
#     set, the sandbox uid and gid (so no capability at all), Landlock,
#     no_new_privs and the seccomp filter, checks all of that in
#     /proc/self/status, reseeds every random generator, forgets this file's
#     modules, and then runs the runner driver waiting for its request on fd 4
#     (or, for a session's kernel, with the arguments and environment
#     additions its fork request names: it then reads cells from fd 4).
# Failures before the payload runs are reported to the server as
# {"kind": "error"} on the execution's status pipe: nothing runs half-isolated.
# Once confined, the payload reports {"kind": "started"} there; the reaper
# later reports {"kind": "exit"}, like a jail's init, after killing whatever
# the payload left.

import os
import sys

# Options before the modules. A lean server ("--lean") imports none of
# them: it only finds out which ones its environment has. "--probe=SECONDS"
# bounds the probe that learns which pages executions write (_probe); 0
# runs none, and executions then copy nothing ahead.
_LEAN, _PROBE_SECONDS = False, 20.0
_PRELOAD = sys.argv[1:]
while _PRELOAD and _PRELOAD[0].startswith("--"):
    _opt = _PRELOAD.pop(0)
    if _opt == "--lean":
        _LEAN = True
    elif _opt.startswith("--probe="):
        _PROBE_SECONDS = float(_opt[len("--probe="):])
del sys.argv[1:]
_PRELOADED = []  # reported when ready: what the environment has of _PRELOAD
for _name in [] if _LEAN else _PRELOAD:
    try:
        __import__(_name)
        _PRELOADED.append(_name)
    except ImportError:
        pass  # the environment lacks it: preload what exists
    except Exception as _e:
        sys.stderr.write("pyexec fork server: not preloading %s: %s\n" % (_name, _e))
if "matplotlib.pyplot" in sys.modules:
    # The first figure loads fonts and the renderer, and pandas' first plot
    # its matplotlib backend: pay that here, once.
    try:
        import io as _io
        _plt = sys.modules["matplotlib.pyplot"]
        if "pandas" in sys.modules:
            sys.modules["pandas"].DataFrame({"a": [0.0, 1.0]}).plot()
        else:
            _plt.plot([0.0, 1.0])
        _plt.savefig(_io.BytesIO(), format="png")
        _plt.close("all")
        # Fonts hold their files open: an execution would inherit them as
        # descriptors its own pipes then replace. Reopened on first use.
        sys.modules["matplotlib.font_manager"]._get_font.cache_clear()
        del _plt, _io
    except Exception as _e:
        sys.stderr.write("pyexec fork server: matplotlib warm-up: %s\n" % _e)
# What a payload may keep of sys.modules: what the interpreter and the
# preloads loaded, not the machinery below.
_KEEP = frozenset(sys.modules)
# The import system's finders, which remember the template's directories: a
# payload starts a cache of its own (_fresh_state), and this reference keeps
# the template's from being freed there.
_TEMPLATE_IMPORTER_CACHE = sys.path_importer_cache
_stdlib_track()  # what loads what from here on (stdlibready.py)

if _LEAN:
    import importlib.machinery  # noqa: E402

    for _name in _PRELOAD:
        try:
            if importlib.machinery.PathFinder.find_spec(_name.partition(".")[0]) is not None:
                _PRELOADED.append(_name)
        except Exception:
            pass

import _io  # noqa: E402
import atexit  # noqa: E402
import ctypes  # noqa: E402
import errno  # noqa: E402
import fcntl  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import warnings  # noqa: E402

# fork() in a process numpy gave threads warns; the payload gets the
# interpreter's own filters back (_fresh_state).
_WARNING_FILTERS = list(warnings.filters)
warnings.filterwarnings("ignore", message=".*fork", category=DeprecationWarning)
# The driver's definitions are made once here; each payload calls its _main
# (the driver runs _main itself only as __main__).
_DRIVER_MODULE = type(sys)("pyexec_driver")
_DRIVER_MODULE.__dict__["__builtins__"] = sys.modules["builtins"]
exec(compile(_DRIVER, "<string>", "exec"), _DRIVER_MODULE.__dict__)
del _DRIVER
_libc = ctypes.CDLL(None, use_errno=True)
# ctypes makes a function object on a function's first use and caches it
# in the library object: done here once, every execution shares them
# instead of making its own (and copying the pages the cache is on).
for _fn in ("mount", "umount2", "sethostname", "unshare", "setns", "prctl", "syscall"):
    getattr(_libc, _fn)
_stdlib_ready(_KEEP)

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC = 32, 4096, 8192, 16384
MS_SLAVE = 1 << 19
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
# landlock_create_ruleset, _add_rule and _restrict_self: 444-446, and
# close_range 436, on both.
SYS_LANDLOCK_CREATE_RULESET, LANDLOCK_ARCHES = 444, ("x86_64", "aarch64")
SYS_CLOSE_RANGE = 436
# How many relay connections the reaper serves between two looks at its
# children (_hand_out).
_RELAY_BATCH = 8
_ARCH = os.uname().machine  # once: the machine does not change under us
SIOCSIFFLAGS, IFF_UP, IFF_LOOPBACK = 0x8914, 1, 8


class _Fail(Exception):
    def __init__(self, step, message):
        Exception.__init__(self, step, message)
        self.step, self.message = step, message


def _sys(step, fn, *args):
    # Calls a libc function that returns 0 on success; anything else fails
    # step with the call's errno.
    if fn(*args) != 0:
        raise _Fail(step, os.strerror(ctypes.get_errno()))


def _c(s):
    return None if s is None else s.encode()


def _mount(src, target, fstype, flags, data=None):
    _sys("mount " + target, _libc.mount, _c(src), _c(target), _c(fstype), ctypes.c_ulong(flags), _c(data))


def _prctl(step, *args):
    _sys(step, _libc.prctl, *[ctypes.c_ulong(a) for a in args])


def _send(fd, msg):
    os.write(fd, (json.dumps(msg) + "\n").encode())


# --- the template ---------------------------------------------------------

def _stray_fds():
    # Descriptors other than stdio and the socket: whatever holds them
    # would act on an execution's pipes once the child reuses the numbers.
    gc.collect()
    return [fd for fd in map(int, os.listdir("/proc/self/fd")) if fd not in (0, 1, 2, 4) and _is_open(fd)]


def _is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False  # the directory listing's own descriptor, closed by now


def _serve():
    sock = socket.socket(fileno=4)
    cfg = json.loads(sock.recv(1 << 20).decode())
    if not cfg:
        os._exit(0)
    if sys.version_info < (3, 9):
        sock.send(json.dumps({"error": "a fork server needs Python 3.9 or later"}).encode())
        os._exit(0)
    stray = _stray_fds()
    if stray:
        sock.send(json.dumps({"error": "the preloads keep descriptors %s open" % stray}).encode())
        os._exit(0)
    cfg["seccomp_prog"] = None
    if cfg.get("seccomp"):
        import base64
        raw = base64.b64decode(cfg["seccomp"])
        buf = ctypes.create_string_buffer(raw, len(raw))
        cfg["seccomp_prog"] = (buf, struct.pack("HxxxxxxP", len(raw) // 8, ctypes.addressof(buf)))
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    _release_free_memory()
    # Everything loaded so far is shared with every execution: the garbage
    # collector of an execution must not walk (and so copy) those pages.
    gc.freeze()
    ready = {"ready": True, "preloads": _PRELOADED}
    # The pages executions write, learned once (precopy.py): only where
    # modules were preloaded, whose heap they would otherwise copy a page
    # at a time on the request's path.
    cfg["precopy"] = []
    if _PRELOADED and not _LEAN and _PROBE_SECONDS > 0:
        try:
            cfg["precopy"], why = _probe(_PROBE_SECONDS, cfg)
        except Exception as e:  # only speed: never the server's end
            why = "probe: %s: %s" % (type(e).__name__, e)
        if why:
            ready["precopy_off"] = why
        else:
            ready["precopy"] = sum(n for _, n in cfg["precopy"])
    signal.signal(signal.SIGCHLD, _reap_children)
    sock.send(json.dumps(ready).encode())
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, 8)
        except InterruptedError:
            continue
        if not msg:
            os._exit(0)  # the server closed: so do we
        req = json.loads(msg.decode())
        if len(fds) != 7:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"error": "expected 7 descriptors, got %d" % len(fds)}).encode())
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        # No SIGCHLD handling between fork and pidfd_open: the child must
        # not be reaped before the server holds its pidfd.
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
        try:
            _sys("unshare(CLONE_NEWPID)", _libc.unshare, CLONE_NEWPID)
            try:
                pid = os.fork()
                if pid == 0:
                    _child(sock, req, fds, cfg)  # never returns
            finally:
                # Back to our own pid namespace for the next fork, whatever
                # happened; a server that cannot must not go on.
                if _libc.setns(own_pidns, CLONE_NEWPID) != 0:
                    os._exit(70)
            pidfd = os.pidfd_open(pid)
        except (_Fail, OSError) as e:
            # Out of pids or memory, say: this execution fails, the
            # executions already running (our descendants) go on.
            msg = "%s: %s" % (e.step, e.message) if isinstance(e, _Fail) else "fork: %s" % e
            sock.send(json.dumps({"error": msg}).encode())
            continue
        finally:
            for fd in fds:
                os.close(fd)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
        try:
            socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [pidfd])
        finally:
            os.close(pidfd)


def _release_free_memory():
    # Compiling the driver and this program, importing and warming up the
    # preloads leave freed chunks all over the C heap. Every fork copies
    # the page tables of every page still mapped and every exit unmaps them
    # again, twice per execution (reaper and payload): the pages no live
    # object uses go back to the kernel here (glibc's malloc_trim; other
    # C libraries keep them), before the probe learns the final layout.
    gc.collect()
    trim = getattr(_libc, "malloc_trim", None)
    if trim is not None:
        trim(0)


def _reap_children(signum, frame):
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# --- one execution: the reaper ---------------------------------------------

def _child(sock, req, fds, cfg):
    status = 5
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
        # Descriptors: stdin, stdout, stderr, channel, request as 0-4; the
        # status pipe (5) and the server's release pipe (6) for the reaper.
        sock.detach()  # fd 4 is about to be the request pipe: never close it
        ctl, st, stdin, stdout, stderr, chan, reqfd = fds
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in (stdin, stdout, stderr, chan, reqfd, st, ctl)]
        for i, fd in enumerate(high):
            os.dup2(fd, i, inheritable=i < 5)
        # Every other descriptor goes, whatever its number, in one call
        # (Linux 5.9+; pyexec needs 5.12).
        if _libc.syscall(ctypes.c_long(SYS_CLOSE_RANGE), 7, ctypes.c_uint(0xFFFFFFFF), 0) != 0:
            raise _Fail("descriptors", "close_range: " + os.strerror(ctypes.get_errno()))
        _isolate(req, cfg)
        relay = _listen_relay(cfg["relay"])
        _own_cgroup_namespace()
        pid = os.fork()
        if pid == 0:
            relay.close()
            _payload(req, cfg)  # never returns
    except _Fail as e:
        _report_failure(status, e.step, e.message)
    except BaseException as e:
        _report_failure(status, "fork server", "%s: %s" % (type(e).__name__, e))
    _reap(pid, req, relay)


def _listen_relay(path):
    # The payload gets no pipe of the server's: it fetches the channel (3)
    # and the request pipe (4) from us on this socket for each use (see
    # sandbox/relay_linux.go). It is in the execution's own /dev/shm,
    # root's, in a sticky directory: the payload can connect to it but not
    # remove or replace it.
    # Non-blocking: the reaper accepts only what its poll saw waiting.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    try:
        s.bind(path)
        os.chmod(path, 0o666)
        s.listen(64)
    except OSError as e:
        s.close()
        raise _Fail("relay", str(e))
    return s


def _report_failure(status, step, message):
    try:
        _send(status, {"kind": "error", "error": {"step": step, "message": message}})
    finally:
        os._exit(1)


def _isolate(req, cfg):
    # A network namespace of its own with network too: an execution's
    # egress device is attached there (sandbox's AttachEgress), never in
    # the server's namespace, which every execution would share.
    flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET
    _sys("unshare", _libc.unshare, flags)
    # Slaves, not private: the server's mounts are all private already
    # (its jail's init made them so), except its workspace slot, a slave of
    # the host's. Nothing propagates from here to anywhere.
    _mount(None, "/", None, MS_REC | MS_SLAVE)
    if cfg.get("slots"):
        # /workspace is the server's slot, which no forked execution uses
        # (a run with a workspace has a jail of its own): it is dropped from
        # this namespace, leaving the empty directory of the read-only root.
        _sys("umount /workspace", _libc.umount2, b"/workspace", MNT_DETACH)
    host = cfg["hostname"].encode()
    _sys("sethostname", _libc.sethostname, host, len(host))
    # A new namespace's loopback has IFF_LOOPBACK, which the kernel keeps
    # whatever is set, and no other flag: nothing to read first.
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", IFF_UP | IFF_LOOPBACK))
    except OSError as e:
        raise _Fail("loopback", str(e))
    finally:
        s.close()
    size, inodes = req["workspace_bytes"], req["workspace_inodes"]
    _mount("tmpfs", "/work", "tmpfs", MS_NOSUID | MS_NODEV,
           "size=%d,nr_inodes=%d,mode=0755,uid=%d,gid=%d" % (size, inodes, cfg["uid"], cfg["gid"]))
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=%d,nr_inodes=%d,mode=1777" % (size, inodes))
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           "size=%d,nr_inodes=%d,mode=1777" % (req["shm_bytes"], inodes))
    # A /proc of the new pid namespace, masked like a cold jail's.
    _sys("umount /proc", _libc.umount2, b"/proc", MNT_DETACH)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # An entry this kernel lacks has nothing to hide. Mounted without
    # looking first: only a mount that fails is checked (_mount_unless_missing).
    for name in cfg["proc_masked"]:
        _mount_unless_missing("/dev/null", "/proc/" + name, MS_BIND)
    for name in cfg["proc_read_only"]:
        p = "/proc/" + name
        if _mount_unless_missing(p, p, MS_BIND | MS_REC):
            _mount(None, p, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _mount_unless_missing(src, target, flags):
    # A bind mount of src onto target; false if target does not exist. Any
    # other failure fails, a missing src among them.
    if _libc.mount(_c(src), _c(target), None, ctypes.c_ulong(flags), None) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.ENOENT and not os.path.lexists(target):
        return False
    raise _Fail("mount " + target, os.strerror(err))


def _own_cgroup_namespace():
    # The server moves this process into the execution's cgroup once it
    # holds its pidfd, then writes one byte on the release pipe (6). Only
    # then is the cgroup namespace made, rooted at that cgroup: the payload,
    # forked after it, is born in both and sees "/" in /proc/self/cgroup.
    try:
        placed = os.read(6, 1)
    except OSError as e:
        raise _Fail("cgroup", "waiting to be placed: %s" % e)
    if placed != b"p":
        raise _Fail("cgroup", "the server did not place the execution in its cgroup")
    _sys("cgroup namespace", _libc.unshare, CLONE_NEWCGROUP)


def _reap(pid, req, relay):
    # PID 1 of the execution, on its one thread: serve the payload's pipes
    # on the relay and reap whatever ends (the payload, and what is
    # re-parented to us) as it ends; once the payload has, kill everything
    # left, reap it, close the pipes and report.
    for fd in range(3):
        os.close(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tags, fds = (b"cr", [3, 4]) if req["channel"] else (b"r", [4])
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(fds), *fds))]
    # A child's end wakes the loop below through a pipe: the interpreter's
    # own signal handler writes to it (set_wakeup_fd), ours does nothing.
    # Made after the payload's fork, so the payload holds neither end; a
    # child that ended before is found by the first pass of _reaped.
    wake, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, _woken)
    poller = select.poll()
    poller.register(relay, select.POLLIN)
    poller.register(wake, select.POLLIN)
    report = _reaped(pid)
    while report is None:
        for fd, _ in poller.poll():
            if fd == wake:
                os.read(wake, 4096)
                report = _reaped(pid)
            elif not _hand_out(relay, tags, rights):
                # The relay cannot accept any more: its clients are refused
                # from now on instead of waiting for an answer.
                poller.unregister(relay)
                relay.close()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    # Every process of the execution is gone, so nothing is left to fetch
    # a pipe from the relay. The pipes close before the report: the server
    # reads them to EOF.
    os.close(3)
    os.close(4)
    try:
        os.write(5, report)
        if req["collect"]:
            while os.read(6, 4096):  # the server reads /work, then closes
                pass
    finally:
        os._exit(0)


def _woken(signum, frame):
    pass  # SIGCHLD: the wake-up pipe has been written to already


def _reaped(payload):
    # Reaps every child that has ended; once the payload is among them, its
    # exit report (whatever else is left is killed next). Formatted, not
    # encoded: the reaper never uses the JSON encoder, whose first use in a
    # process copies the pages it touches of the fork server's.
    while True:
        try:
            got, ws = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return b'{"kind": "exit", "exit": {"Signal": 9}}\n'
        if got == 0:
            return None
        if got == payload:
            if os.WIFEXITED(ws):
                return b'{"kind": "exit", "exit": {"Exited": true, "ExitCode": %d}}\n' % os.WEXITSTATUS(ws)
            return b'{"kind": "exit", "exit": {"Signal": %d}}\n' % os.WTERMSIG(ws)


def _hand_out(relay, tags, rights):
    # The connections waiting on the relay, at most _RELAY_BATCH of them,
    # each get the pipes (rights, tagged by tags) and are closed; false
    # once the relay cannot accept. Nothing is read from a client and the
    # send never waits (a fresh socket's buffer takes a message this small;
    # MSG_DONTWAIT says so), so no client can hold the reaper up; and the
    # batch is bounded, so that processes connecting without end cannot
    # keep it from its poll, and so from seeing the payload's exit.
    for _ in range(_RELAY_BATCH):
        try:
            conn, _ = relay.accept()
        except BlockingIOError:
            return True
        except ConnectionAbortedError:
            continue
        except OSError:
            return False
        try:
            conn.sendmsg([tags], rights, socket.MSG_NOSIGNAL | socket.MSG_DONTWAIT)
        except OSError:
            pass  # the client went away: its loss
        finally:
            conn.close()
    return True


# --- one execution: the payload -------------------------------------------

def _payload(req, cfg):
    try:
        os.close(6)
        os.close(3)  # the result channel comes from the reaper's relay
        os.environ["PYEXEC_RELAY"] = cfg["relay"]
        os.setsid()
        cpu = req["cpu_seconds"]
        for step, res, soft, hard in (
            ("core", resource.RLIMIT_CORE, 0, 0),
            ("nofile", resource.RLIMIT_NOFILE, req["open_files"], req["open_files"]),
            ("fsize", resource.RLIMIT_FSIZE, req["file_size_bytes"], req["file_size_bytes"]),
            ("stack", resource.RLIMIT_STACK, 8 << 20, 8 << 20),
            ("cpu", resource.RLIMIT_CPU, cpu, cpu + 1),
        ):
            try:
                resource.setrlimit(res, (soft, hard))
            except (OSError, ValueError) as e:
                raise _Fail("rlimit " + step, str(e))
        _become_user(cfg)
        plan = cfg.get("landlock")
        if plan and plan["abi"]:
            _landlock(plan)
        _seal(cfg)
        _verify(cfg)
        os.chdir(req["dir"])
        # Fully confined (and in the execution's cgroup since birth): tell
        # the server, which then hands us the request.
        _send(5, {"kind": "started", "started": {"pid": os.getpid()}})
    except _Fail as e:
        _report_failure(5, e.step, e.message)
    except BaseException as e:
        _report_failure(5, "payload", "%s: %s" % (type(e).__name__, e))
    os.close(5)
    _fresh_state()
    for kv in req.get("env") or ():
        key, _, value = kv.partition("=")
        os.environ[key] = value
    args = req.get("args")
    if not args:
        _warm(cfg["precopy"], req.get("precopy_budget", 0))
    _run_driver(args or ["--wait-request", "4"])


def _become_user(cfg):
    # The sandbox user's credentials and no capability: the fork server's
    # bounding set holds only what it was started with (cfg["bounding"]),
    # which _verify checks ends up empty.
    for cap in cfg["bounding"]:
        _prctl("capabilities", PR_CAPBSET_DROP, cap, 0, 0, 0)
    _prctl("capabilities", PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    os.setgroups([])
    os.setresgid(cfg["gid"], cfg["gid"], cfg["gid"])
    os.setresuid(cfg["uid"], cfg["uid"], cfg["uid"])
    _prctl("pdeathsig", PR_SET_PDEATHSIG, signal.SIGKILL)  # the uid change cleared it


def _seal(cfg):
    # No privilege gained by exec from here on, and the seccomp filter.
    _prctl("no_new_privs", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if cfg["seccomp_prog"]:
        prog = ctypes.create_string_buffer(cfg["seccomp_prog"][1])
        _prctl("seccomp", PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0)


def _landlock(plan):
    if _ARCH not in LANDLOCK_ARCHES:
        raise _Fail("landlock", "unknown architecture")
    nr = SYS_LANDLOCK_CREATE_RULESET
    attr = ctypes.create_string_buffer(struct.pack("QQQ", plan["handled_fs"], 0, plan["scoped"]))
    rs = _libc.syscall(ctypes.c_long(nr), attr, ctypes.c_size_t(24), ctypes.c_uint32(0))
    if rs < 0:
        raise _Fail("landlock", "landlock_create_ruleset: " + os.strerror(ctypes.get_errno()))
    try:
        for rule in plan["rules"]:
            try:
                fd = os.open(rule["path"], os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                beneath = ctypes.create_string_buffer(struct.pack("=Qi", rule["rights"], fd))
                _sys("landlock rule for " + rule["path"], _libc.syscall,
                     ctypes.c_long(nr + 1), ctypes.c_int(rs), ctypes.c_int(1), beneath, ctypes.c_uint32(0))
            finally:
                os.close(fd)
        _sys("landlock_restrict_self", _libc.syscall, ctypes.c_long(nr + 2), ctypes.c_int(rs), ctypes.c_uint32(0))
    finally:
        os.close(rs)


def _verify(cfg):
    # Fail closed: the kernel's view of this process must be a cold jail's.
    fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
    try:
        raw = b""
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            raw += chunk
    finally:
        os.close(fd)
    st = {}
    for line in raw.decode().split("\n"):
        key, tab, value = line.partition(":\t")
        if tab:
            st[key] = value
    want = {"CapInh": "0" * 16, "CapPrm": "0" * 16, "CapEff": "0" * 16, "CapBnd": "0" * 16, "CapAmb": "0" * 16,
            "NoNewPrivs": "1"}
    if cfg["seccomp_prog"]:
        want["Seccomp"] = "2"
    for key, value in want.items():
        if st.get(key, "").strip() != value:
            raise _Fail("verify", "%s is %r, want %r" % (key, st.get(key, "").strip(), value))
    uids = st.get("Uid", "").split()
    if uids != [str(cfg["uid"])] * 4:
        raise _Fail("verify", "uids are %r" % uids)


def _fresh_state():
    # Nothing of the template's state that differs per process may be
    # shared: random generators are reseeded from the kernel, caches that
    # remember the template's directories are dropped, and the modules
    # this file imported are forgotten (a user's json.py then shadows json
    # as in a cold run).
    rnd = sys.modules.get("random")
    if rnd is not None:
        rnd.seed()
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:
        np_random.seed()
    tf = sys.modules.get("tempfile")
    if tf is not None:
        tf._name_sequence = None
    # A new cache rather than the template's cleared: clearing it would
    # free its finders and their directory listings, writing to (so
    # copying) every page they are on, ≈ 100 faults per execution.
    sys.path_importer_cache = {}
    warnings.filters[:] = _WARNING_FILTERS
    warnings._filters_mutated()
    # Exit callbacks the preloads registered are the fork server's (say,
    # removing a temporary directory of its own /tmp), not the payload's.
    atexit._clear()
    for name in list(sys.modules):
        if name not in _KEEP:
            del sys.modules[name]
    _stdlib_serve()  # ...and served again as the payload imports them
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _warm(precopy, budget):
    # An execution waits for its request; what every request then does
    # first touches pages this process shares with the fork server, and
    # each first write copies one (a fault). Done here, before the wait,
    # with throwaway values, those copies leave the request's path. Nothing
    # made here survives (no module is imported, no global set, no
    # descriptor left open) but stdout's line buffering, which the driver
    # sets before any user code anyway. Then everything that exists is
    # frozen, as the fork server froze its own heap: the exit's walk for
    # unflushed files (_flush_open_files) then sees only what the request
    # made. Last, the pages the fork server's probe found executions write
    # are copied (precopy.py), up to budget bytes: the payload is in its
    # execution's cgroup already (born there), which they are charged to.
    # TestForkedExecutionStartsClean (internal/pool) holds this.
    d = _DRIVER_MODULE
    try:
        d._parse(["--report-fd", "3", "--", "main.py"])
        cwd = os.getcwd()
        d._user_roots(os.path.join(cwd, "main.py"))
        os.path.abspath("main.py")
        d._json({"result": None, "error": None, "exit_code": 0, "results": [1.5, "\u00e9"]})
        d._compile("x = 1\nprint(x)\n", os.path.join(cwd, "main.py"), False)
        m = type(sys)("__main__")
        sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", cwd)
        d._Rich(d._Channel(3, "/", []), d._Opts(), [])
        del m
        with open(os.devnull, "rb") as f:  # what reading main.py goes through
            f.read()
        sys.stdout.reconfigure(line_buffering=True)
    except BaseException:
        pass  # only a warm-up: the request path does it all again
    _flush_open_files()
    gc.collect()
    gc.freeze()
    _precopy(precopy, budget)


def _run_driver(args):
    # args: a warm execution's "--wait-request 4", or a session kernel's
    # "--session 4 ..." from its fork request.
    sys.argv[1:] = args
    mod = _DRIVER_MODULE
    mod.__name__ = "__main__"
    sys.modules["__main__"] = mod
    code = 0
    try:
        mod._main()
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:
        _shutdown()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        try:
            sys.stderr.write(str(code) + "\n")
        except BaseException:
            pass
        code = 1
    _shutdown()
    os._exit(code & 0xFF)


def _flush_open_files():
    # An interpreter's finalization closes the files still open (a user's
    # open(...).write(...) without close); os._exit would lose what they
    # buffer. The shared heap is frozen, and so is what a forked execution
    # made before its request (_warm): this walks what the request made.
    # Every file object derives from _io._IOBase: a type check against it
    # costs nothing, while io.IOBase (an ABC) fills a cache per type seen
    # (3-5 ms after a pandas snippet, before the execution can end).
    try:
        for o in gc.get_objects():
            if isinstance(o, _io._IOBase):
                try:
                    if not o.closed:
                        o.flush()
                except BaseException:
                    pass
    except BaseException:
        pass


def _shutdown():
    # What the interpreter does at exit that a user can observe: join
    # non-daemon threads, run atexit callbacks, flush. Not the teardown of
    # every module, which only costs time.
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
    except BaseException:
        pass
    try:
        # The callbacks are the interpreter's, whichever atexit module
        # object registered them (a user's import makes a new one).
        atexit._run_exitfuncs()
    except BaseException:
        pass
    _flush_open_files()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass


_serve()
