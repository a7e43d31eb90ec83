# pyexec bench: the kernel's floor under one forked execution.
#
#     python -B -c <this source> <driver source> ROUNDS PER_ROUND
#
# Run as root. This process makes itself about the size of a lean fork
# server (the modules forkserver.py imports and the runner driver's
# definitions), then repeats, per round and step, PER_ROUND times:
#   bare   posix_spawn of `python -I -S -c pass` (the baseline of P3)
#   fork   fork; the child exits
#   ns     + new mount, IPC and UTS namespaces, / made private
#   net    + a new network namespace with its loopback up
#   mounts + tmpfs on three directories and a new /proc
#   reaper + a new pid namespace: the child forks again (the payload) and
#            reaps it, as a forked execution's reaper does
#   code   + the payload compiles and runs `print(1)` (to /dev/null) and
#            encodes a report, the least a request's Python does
# Each step adds to the one before; none runs Python code of the user's, a
# cgroup, Landlock, seccomp or the server. It prints one JSON object: per
# step, the CPU of this process and its children (getrusage, ms per
# iteration) and of the whole machine (/proc/stat, which also holds the
# kernel workers that free network namespaces, and whatever else runs).

import ctypes
import json
import os
import resource
import socket
import struct
import sys
import time
import fcntl  # noqa: F401  (forkserver.py's imports: the same heap)
import select  # noqa: F401
import signal  # noqa: F401
import warnings  # noqa: F401

_DRIVER = type(sys)("pyexec_driver")
_DRIVER.__dict__["__builtins__"] = sys.modules["builtins"]
exec(compile(sys.argv[1], "<string>", "exec"), _DRIVER.__dict__)
ROUNDS, PER_ROUND = int(sys.argv[2]), int(sys.argv[3])
del sys.argv[1:]  # the driver's source: a fork server does not keep it either

libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUTS = 0x00020000, 0x08000000, 0x04000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_REC, MS_PRIVATE, MNT_DETACH = 16384, 1 << 18, 2
STEPS = ("bare", "fork", "ns", "net", "mounts", "reaper", "code")


def _ok(r, what):
    if r != 0:
        raise OSError(ctypes.get_errno(), what)


def _mount(src, target, fstype, flags, data=None):
    enc = (lambda s: None if s is None else s.encode())
    _ok(libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), "mount " + target)


def _child(step):
    # What a forked execution's reaper does to the kernel, up to step.
    if step == "fork":
        return
    flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS
    if step != "ns":
        flags |= CLONE_NEWNET
    _ok(libc.unshare(flags), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    if step == "ns":
        return
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifr = fcntl.ioctl(s, 0x8913, struct.pack("16sH14x", b"lo", 0))  # SIOCGIFFLAGS
    up = struct.unpack("16sH14x", ifr)[1] | 1
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", up))  # SIOCSIFFLAGS
    s.close()
    if step == "net":
        return
    for target in ("/tmp", "/dev/shm", "/mnt"):
        _mount("tmpfs", target, "tmpfs", 6, "size=1048576,nr_inodes=64")
    _ok(libc.umount2(b"/proc", MNT_DETACH), "umount /proc")
    _mount("proc", "/proc", "proc", 14)
    if step == "mounts":
        return
    pid = os.fork()
    if pid == 0:
        if step == "code":
            _code()
        os._exit(0)
    os.waitpid(pid, 0)


def _code():
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    exec(compile("print(1)\n", "main.py", "exec"), {"__name__": "__main__"})
    sys.stdout.flush()
    json.dumps({"result": None, "error": None, "exit_code": 0, "outputs": []})


def _once(step, own_pidns):
    if step == "bare":
        pid = os.posix_spawn(sys.executable, [sys.executable, "-I", "-S", "-c", "pass"], {})
        os.waitpid(pid, 0)
        return
    if step in ("reaper", "code"):
        _ok(libc.unshare(CLONE_NEWPID), "unshare pid")
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            _child(step)
        except BaseException as e:
            sys.stderr.write("floor %s: %s\n" % (step, e))
            code = 1
        os._exit(code)
    if step in ("reaper", "code"):
        _ok(libc.setns(own_pidns, CLONE_NEWPID), "setns")
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit("floor: step %s failed" % step)


def _cpu():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _machine():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def main():
    # As a fork server does before it serves: the freed heap goes back.
    import gc
    gc.collect()
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)
    gc.freeze()
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    cpu = dict.fromkeys(STEPS, 0.0)
    machine = dict.fromkeys(STEPS, 0.0)
    for _ in range(ROUNDS):
        for step in STEPS:
            c0, m0 = _cpu(), _machine()
            for _ in range(PER_ROUND):
                _once(step, own_pidns)
            time.sleep(0.05)  # the workers freeing namespaces count with the step
            cpu[step] += _cpu() - c0
            machine[step] += _machine() - m0
    n = ROUNDS * PER_ROUND
    with open("/proc/self/status") as f:
        anon = [line.split()[1] for line in f if line.startswith("RssAnon:")]
    print(json.dumps({
        "iterations": n,
        "anon_kib": int(anon[0]) if anon else 0,
        "cpu_ms": {k: v * 1000 / n for k, v in cpu.items()},
        "machine_ms": {k: v * 1000 / n for k, v in machine.items()},
    }))


main()
