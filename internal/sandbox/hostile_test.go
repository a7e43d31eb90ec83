package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// syscallPrelude gives hostile programs raw syscalls by name.
const syscallPrelude = `
import ctypes, errno, os, platform
NR = {
 "x86_64": dict(ptrace=101, keyctl=250, add_key=248, request_key=249, bpf=321, perf_event_open=298,
   userfaultfd=323, io_uring_setup=425, init_module=175, finit_module=313, kexec_load=246,
   open_by_handle_at=304, process_vm_readv=310, clock_settime=227, personality=135, mount=165,
   unshare=272, setns=308, chroot=161, pivot_root=155, reboot=169, swapon=167, acct=163, clone=56,
   inotify_init=253, inotify_init1=294, inotify_add_watch=254, inotify_rm_watch=255, fanotify_init=300,
   fanotify_mark=301, cachestat=451, fcntl=72),
 "aarch64": dict(ptrace=117, keyctl=219, add_key=217, request_key=218, bpf=280, perf_event_open=241,
   userfaultfd=282, io_uring_setup=425, init_module=105, finit_module=273, kexec_load=104,
   open_by_handle_at=265, process_vm_readv=270, clock_settime=112, personality=92, mount=40,
   unshare=97, setns=268, chroot=51, pivot_root=41, reboot=142, swapon=224, acct=89, clone=220,
   inotify_init1=26, inotify_add_watch=27, inotify_rm_watch=28, fanotify_init=262, fanotify_mark=263,
   cachestat=451, fcntl=25),
}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
def sc(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(NR[name], *[ctypes.c_long(a) for a in args])
    return r, ctypes.get_errno()
def denied(name, *args):
    r, e = sc(name, *args)
    print(name, "DENIED" if r == -1 and e in (errno.EPERM, errno.EACCES) else "ALLOWED r=%d errno=%d" % (r, e))
`

// hostileCase is one hostile program and the safe outcome it must meet.
type hostileCase struct {
	name  string
	code  string
	opts  []pyOpt
	check func(t *testing.T, r Result)
}

// printed asserts the program ran to completion and printed every want.
func printed(want ...string) func(*testing.T, Result) {
	return func(t *testing.T, r Result) {
		t.Helper()
		if r.Status != StatusOK {
			t.Fatalf("status %s (%s), exit %d; stderr: %s", r.Status, r.Reason, r.ExitCode, r.Stderr)
		}
		for _, w := range want {
			if !strings.Contains(string(r.Stdout), w) {
				t.Errorf("stdout lacks %q:\n%s", w, r.Stdout)
			}
		}
	}
}

// notPrinted asserts the program completed and never printed any of bad.
func notPrinted(bad ...string) func(*testing.T, Result) {
	return func(t *testing.T, r Result) {
		t.Helper()
		if r.Status != StatusOK {
			t.Fatalf("status %s (%s); stderr: %s", r.Status, r.Reason, r.Stderr)
		}
		for _, b := range bad {
			if strings.Contains(string(r.Stdout)+string(r.Stderr), b) {
				t.Errorf("output contains %q:\n%s", b, r.Stdout)
			}
		}
	}
}

// ended asserts the final status and that the run stopped within bound.
func ended(status Status, within time.Duration) func(*testing.T, Result) {
	return func(t *testing.T, r Result) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("status %s (%s), want %s; stdout: %.200s stderr: %.300s", r.Status, r.Reason, status, r.Stdout, r.Stderr)
		}
		if r.WallTime > within {
			t.Errorf("ran %s, want at most %s", r.WallTime, within)
		}
	}
}

// both combines checks.
func both(checks ...func(*testing.T, Result)) func(*testing.T, Result) {
	return func(t *testing.T, r Result) {
		t.Helper()
		for _, c := range checks {
			c(t, r)
		}
	}
}

// fsCases: reading host files, escaping the root, writing outside the
// workspace, filling the writable mounts.
func fsCases(t *testing.T) []hostileCase {
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "server-secret.txt")
	if err := os.WriteFile(secret, []byte("TOPSECRET-DATA"), 0o644); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	tryRead := func(path string) string {
		return fmt.Sprintf(`
try:
    print(open(%q, "rb").read()[:100])
except OSError as e:
    print("BLOCKED", type(e).__name__)`, path)
	}
	small := withLimits(Limits{WorkspaceBytes: 4 << 20, ShmBytes: 2 << 20, FileSizeBytes: 64 << 20})
	fill := func(dir string) string {
		return fmt.Sprintf(`
import errno
try:
    with open(%q, "wb") as f:
        for _ in range(64):
            f.write(b"x" * (1 << 20))
            f.flush()
    print("FILLED")
except OSError as e:
    print("FULL", errno.errorcode[e.errno])`, dir+"/big")
	}
	return []hostileCase{
		{"read /etc/shadow", tryRead("/etc/shadow"), nil, both(printed("BLOCKED"), notPrinted("root:"))},
		{"read host /etc/hostname", `import socket; print(open("/etc/hostname").read().strip(), socket.gethostname())`, nil, func(t *testing.T, r Result) {
			host, _ := os.Hostname()
			printed("pyexec pyexec")(t, r)
			if host != "pyexec" && strings.Contains(string(r.Stdout), host) {
				t.Errorf("host name %q visible", host)
			}
		}},
		{"read the server binary", tryRead(self), nil, printed("BLOCKED")},
		{"read init's binary via /proc/1/exe", tryRead("/proc/1/exe"), nil, printed("BLOCKED")},
		{"read the data dir", tryRead(secret), nil, both(printed("BLOCKED"), notPrinted("TOPSECRET"))},
		{"list /root and /home", `import os
for d in ("/root", "/home", "/sys", "/run", "/var"):
    print(d, "EXISTS" if os.path.exists(d) else "ABSENT")`, nil, both(printed("/root ABSENT", "/home ABSENT", "/sys ABSENT", "/run ABSENT"), notPrinted("EXISTS"))},
		{"escape with ..", tryRead("/work/../../../../../../etc/shadow"), nil, printed("BLOCKED")},
		{"escape with a symlink", `import os
os.symlink("/etc/shadow", "/work/link"); os.symlink("/proc/1/root/etc/shadow", "/work/link2")
for p in ("/work/link", "/work/link2", "/proc/1/root/etc/passwd"):
    try: print(open(p).read()[:40])
    except OSError as e: print("BLOCKED", type(e).__name__)`, nil, both(notPrinted("root:x:0:0:root:/root:/bin/bash"), func(t *testing.T, r Result) {
			if strings.Count(string(r.Stdout), "BLOCKED") < 3 {
				t.Errorf("a symlink escaped: %s", r.Stdout)
			}
		})},
		{"write outside the workspace", `import os
for p in ("/usr/evil", "/etc/evil", "/evil", "/bin/evil", "/dev/evil", "/proc/sys/kernel/hostname", "/proc/sysrq-trigger"):
    try:
        with open(p, "w") as f: f.write("x")
        print("WROTE", p)
    except OSError as e:
        print("BLOCKED", p)`, nil, notPrinted("WROTE")},
		{"chmod a system file", `import os
try:
    os.chmod("/usr/bin/python3", 0o777); print("CHANGED")
except OSError as e: print("BLOCKED", e.errno)`, nil, printed("BLOCKED")},
		{"fill /work", fill("/work"), []pyOpt{small}, printed("FULL ENOSPC")},
		{"fill /tmp", fill("/tmp"), []pyOpt{small}, printed("FULL ENOSPC")},
		{"fill /dev/shm", fill("/dev/shm"), []pyOpt{small}, printed("FULL ENOSPC")},
		{"exhaust inodes", `import errno
n = 0
try:
    while True:
        open("/work/f%d" % n, "w").close(); n += 1
except OSError as e:
    print("FULL", errno.errorcode[e.errno], n < 2000)`, []pyOpt{withLimits(Limits{WorkspaceInodes: 1000})}, printed("FULL ENOSPC True")},
		{"single file over the size limit", `import errno
try:
    with open("/work/big", "wb") as f: f.write(b"x" * (3 << 20))
    print("WROTE")
except OSError as e: print("LIMIT", errno.errorcode[e.errno])`, []pyOpt{withLimits(Limits{FileSizeBytes: 1 << 20})}, printed("LIMIT EFBIG")},
		{"open files limit", `import errno
fs = []
try:
    while True: fs.append(open("/dev/null"))
except OSError as e: print("LIMIT", errno.errorcode[e.errno], len(fs) < 64)`, []pyOpt{withLimits(Limits{OpenFiles: 64})}, printed("LIMIT EMFILE True")},
		{"binary input files arrive", `print(open("/work/data/blob.bin", "rb").read() == bytes(range(256)), open("/work/main.txt").read())`,
			[]pyOpt{withFiles(File{Path: "data/blob.bin", Data: func() []byte {
				b := make([]byte, 256)
				for i := range b {
					b[i] = byte(i)
				}
				return b
			}()}, File{Path: "main.txt", Data: []byte("hello")})}, printed("True hello")},
	}
}

// netCases: every way out of the jail's network namespace.
func netCases(t *testing.T) []hostileCase {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	abstractName := fmt.Sprintf("pyexec-test-host-service-%d", os.Getpid())
	abstract, err := net.Listen("unix", "@"+abstractName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { abstract.Close() })
	sockPath := filepath.Join(t.TempDir(), "host.sock")
	fsSock, err := net.Listen("unix", sockPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsSock.Close() })
	try := func(body string) string {
		return "import socket\ntry:\n    " + body + "\n    print('CONNECTED')\nexcept OSError as e:\n    print('BLOCKED', type(e).__name__)"
	}
	return []hostileCase{
		{"tcp egress", try(`socket.create_connection(("1.1.1.1", 80), timeout=3)`), nil, printed("BLOCKED")},
		{"tcp to a host loopback service", try(fmt.Sprintf(`socket.create_connection(("127.0.0.1", %d), timeout=3)`, port)), nil, printed("BLOCKED")},
		{"udp egress", try(`s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("8.8.8.8", 53))`), nil, printed("BLOCKED")},
		{"dns lookup", try(`socket.getaddrinfo("example.com", 80)`), nil, printed("BLOCKED")},
		{"raw socket", try(`socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)`), nil, printed("BLOCKED PermissionError")},
		{"packet socket", try(`socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)`), nil, printed("BLOCKED")},
		{"vsock socket", try(`socket.socket(40, socket.SOCK_STREAM, 0)`), nil, printed("BLOCKED")},
		{"netlink audit socket", try(`socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9)`), nil, printed("BLOCKED")},
		{"abstract unix socket of a host service", try(fmt.Sprintf(`s = socket.socket(socket.AF_UNIX); s.connect("\0%s")`, abstractName)), nil, printed("BLOCKED")},
		{"filesystem unix socket of a host service", try(fmt.Sprintf(`s = socket.socket(socket.AF_UNIX); s.connect(%q)`, sockPath)), nil, printed("BLOCKED")},
		{"loopback inside the jail works", `import socket, threading
srv = socket.create_server(("127.0.0.1", 0)); port = srv.getsockname()[1]
threading.Thread(target=lambda: srv.accept()[0].sendall(b"pong"), daemon=True).start()
c = socket.create_connection(("127.0.0.1", port), timeout=3); print(c.recv(4).decode())`, nil, printed("pong")},
	}
}

// resourceCases: bombs, burns, floods and processes that refuse to die.
func resourceCases() []hostileCase {
	return []hostileCase{
		{"fork bomb", `import os
while True:
    try: os.fork()
    except OSError: pass`, []pyOpt{withLimits(Limits{Pids: 32, WallTime: 3 * time.Second, CPUTime: 3 * time.Second})}, ended(StatusTimeout, 6*time.Second)},
		{"thread bomb", `import threading, time
n = 0
try:
    while True:
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start(); n += 1
except RuntimeError:
    print("CAPPED", n < 64)`, []pyOpt{withLimits(Limits{Pids: 64})}, printed("CAPPED True")},
		{"memory bomb", `x = []
while True: x.append(bytearray(16 << 20))`, []pyOpt{withLimits(Limits{MemoryBytes: 64 << 20})}, func(t *testing.T, r Result) {
			ended(StatusOOM, 20*time.Second)(t, r)
			if r.PeakMemory > 80<<20 {
				t.Errorf("peak memory %d exceeds the 64 MiB limit", r.PeakMemory)
			}
		}},
		{"cpu burn", "while True: pass", []pyOpt{withLimits(Limits{CPUTime: time.Second, WallTime: 10 * time.Second})}, ended(StatusTimeout, 4*time.Second)},
		{"cpu burn on many threads", `import threading
def burn():
    while True: pass
for _ in range(4): threading.Thread(target=burn).start()`, []pyOpt{withLimits(Limits{CPUTime: time.Second, WallTime: 10 * time.Second, CPUs: 2})}, ended(StatusTimeout, 4*time.Second)},
		{"sleep past the timeout keeps partial output", `import time
print("before", flush=True)
time.sleep(60)
print("after")`, []pyOpt{withLimits(Limits{WallTime: 3 * time.Second})}, both(ended(StatusTimeout, 6*time.Second), func(t *testing.T, r Result) {
			if string(r.Stdout) != "before\n" {
				t.Errorf("partial output %q, want %q", r.Stdout, "before\n")
			}
		})},
		{"SIGSTOP itself", `import os, signal
print("stopping", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)`, []pyOpt{withLimits(Limits{WallTime: time.Second})}, ended(StatusTimeout, 3*time.Second)},
		{"ignore SIGTERM", `import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
time.sleep(60)`, []pyOpt{withLimits(Limits{WallTime: time.Second})}, ended(StatusTimeout, 3*time.Second)},
		{"double fork and setsid daemon", `import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(1); os.close(2)
        while True: time.sleep(0.1)
    os._exit(0)
os.wait()
print("parent done")`, nil, printed("parent done")},
		{"output flood", `import sys
while True: sys.stdout.write("x" * 65536)`, []pyOpt{withLimits(Limits{StdoutBytes: 1 << 20})}, func(t *testing.T, r Result) {
			ended(StatusOutputLimit, 10*time.Second)(t, r)
			if len(r.Stdout) != 1<<20 || !r.StdoutTruncated {
				t.Errorf("kept %d bytes (truncated=%v), want exactly %d", len(r.Stdout), r.StdoutTruncated, 1<<20)
			}
		}},
		{"stderr flood", `import sys
while True: sys.stderr.write("y" * 65536)`, []pyOpt{withLimits(Limits{StderrBytes: 256 << 10})}, ended(StatusOutputLimit, 10*time.Second)},
	}
}

// privilegeCases: syscalls and privileges the payload must not have.
func privilegeCases() []hostileCase {
	sys := func(calls ...string) string {
		return syscallPrelude + strings.Join(calls, "\n")
	}
	return []hostileCase{
		{"ptrace", sys(`denied("ptrace", 16, 1, 0, 0)`, `denied("ptrace", 0, 0, 0, 0)`), nil, both(printed("ptrace DENIED"), notPrinted("ALLOWED"))},
		{"process_vm_readv", sys(`denied("process_vm_readv", 1, 0, 0, 0, 0, 0)`), nil, printed("process_vm_readv DENIED")},
		{"mount", sys(`denied("mount", 0, 0, 0, 0, 0)`), nil, printed("mount DENIED")},
		{"unshare a user namespace", sys(`denied("unshare", 0x10000000)`, `denied("unshare", 0x20000)`), nil, both(printed("unshare DENIED"), notPrinted("ALLOWED"))},
		{"clone into new namespaces", sys(`denied("clone", 0x10000000 | 0x20000000 | 17, 0, 0, 0, 0)`), nil, printed("clone DENIED")},
		{"setns", sys(`denied("setns", 0, 0)`), nil, printed("setns DENIED")},
		{"chroot and pivot_root", sys(`denied("chroot", 0)`, `denied("pivot_root", 0, 0)`), nil, both(printed("chroot DENIED", "pivot_root DENIED"), notPrinted("ALLOWED"))},
		{"keyctl", sys(`denied("keyctl", 0, 0, 0, 0, 0)`, `denied("add_key", 0, 0, 0, 0, 0)`, `denied("request_key", 0, 0, 0, 0)`), nil, notPrinted("ALLOWED")},
		{"bpf", sys(`denied("bpf", 0, 0, 0)`), nil, printed("bpf DENIED")},
		{"io_uring", sys(`denied("io_uring_setup", 1, 0)`), nil, printed("io_uring_setup DENIED")},
		{"perf_event_open and userfaultfd", sys(`denied("perf_event_open", 0, 0, -1, -1, 0)`, `denied("userfaultfd", 0)`), nil, notPrinted("ALLOWED")},
		{"kernel modules and kexec", sys(`denied("init_module", 0, 0, 0)`, `denied("finit_module", 0, 0, 0)`, `denied("kexec_load", 0, 0, 0, 0)`), nil, notPrinted("ALLOWED")},
		{"open_by_handle_at", sys(`denied("open_by_handle_at", 0, 0, 0)`), nil, printed("open_by_handle_at DENIED")},
		{"reboot, swapon, acct, clock_settime", sys(`denied("reboot", 0, 0, 0, 0)`, `denied("swapon", 0, 0)`, `denied("acct", 0)`, `denied("clock_settime", 0, 0)`), nil, notPrinted("ALLOWED")},
		{"personality", sys(`denied("personality", 0x0040000)`, `r, e = sc("personality", 0xffffffff); print("query ok" if r >= 0 else "query failed")`), nil, printed("personality DENIED", "query ok")},
		{"TIOCSTI, also with high bits set", `import fcntl, errno
for req in (0x5412, 0x5412 | (1 << 32)):
    try:
        fcntl.ioctl(0, req, b"x"); print("INJECTED")
    except OSError as e:
        print("BLOCKED", errno.errorcode[e.errno])`, nil, both(notPrinted("INJECTED", "ENOTTY"), printed("BLOCKED EPERM"))},
		{"foreign syscall ABI is killed", `import ctypes, mmap, platform, sys
if platform.machine() != "x86_64":
    print("SKIP"); sys.exit(0)
# mov eax, 20 (i386 getpid); int 0x80; ret
code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
print("calling", flush=True)
ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
print("SURVIVED")`, nil, func(t *testing.T, r Result) {
			if strings.Contains(string(r.Stdout), "SKIP") {
				t.Skip("x86_64 only")
			}
			if strings.Contains(string(r.Stdout), "SURVIVED") || r.Signal != 31 {
				t.Fatalf("i386 syscall not killed: status %s signal %d stdout %s", r.Status, r.Signal, r.Stdout)
			}
		}},
		{"x32 syscall is killed", `import ctypes, platform, sys
if platform.machine() != "x86_64":
    print("SKIP"); sys.exit(0)
libc = ctypes.CDLL(None)
libc.syscall(0x40000000 + 39)
print("SURVIVED")`, nil, func(t *testing.T, r Result) {
			if strings.Contains(string(r.Stdout), "SKIP") {
				t.Skip("x86_64 only")
			}
			if strings.Contains(string(r.Stdout), "SURVIVED") || r.Signal != 31 {
				t.Fatalf("x32 syscall not killed: status %s signal %d", r.Status, r.Signal)
			}
		}},
		{"become root", `import os
for f in (lambda: os.setuid(0), lambda: os.setgid(0), lambda: os.setgroups([0])):
    try: f(); print("ROOT")
    except OSError: print("BLOCKED")`, nil, both(printed("BLOCKED"), notPrinted("ROOT"))},
		{"no capabilities, no_new_privs, seccomp on", `import os
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
print("uid", st["Uid"].split()[0], "CapEff", st["CapEff"].strip(), "CapBnd", st["CapBnd"].strip(), "CapAmb", st["CapAmb"].strip(), "NoNewPrivs", st["NoNewPrivs"].strip(), "Seccomp", st["Seccomp"].strip())`,
			nil, printed("uid 65534 CapEff 0000000000000000 CapBnd 0000000000000000 CapAmb 0000000000000000 NoNewPrivs 1 Seccomp 2")},
		{"server environment does not leak", `import os
print(sorted(os.environ))
try: print(open("/proc/1/environ").read())
except OSError: print("BLOCKED")`, nil, notPrinted("PYEXEC_TEST_SECRET", "s3cr3t-value")},
		{"host processes are invisible", `import os
pids = [p for p in os.listdir("/proc") if p.isdigit()]
cmd = open("/proc/1/cmdline").read().replace("\0", " ")
print("PIDS", len(pids), "INIT", cmd)`, nil, func(t *testing.T, r Result) {
			// PID 1 is the jail's init, or a forked execution's reaper.
			printed("INIT ")(t, r)
			if !strings.Contains(string(r.Stdout), "INIT pyexec sandbox-init") && !strings.Contains(string(r.Stdout), "# pyexec fork server.") {
				t.Errorf("PID 1 is neither init nor a reaper: %.200s", r.Stdout)
			}
			var n int
			fmt.Sscanf(strings.TrimPrefix(string(r.Stdout), "PIDS "), "%d", &n)
			if n > 3 {
				t.Errorf("the jail sees %d processes: %s", n, r.Stdout)
			}
		}},
		{"sees only its own cgroup and stdio", ownViewProbe, nil, ownView},
		{"only harmless devices", `import os; print(sorted(os.listdir("/dev")))`, nil, func(t *testing.T, r Result) {
			printed("'null'", "'urandom'", "'shm'")(t, r)
			for _, bad := range []string{"sda", "mem", "kmsg", "tty0", "vda", "nvme", "kvm", "fuse"} {
				if strings.Contains(string(r.Stdout), "'"+bad) {
					t.Errorf("/dev exposes %s: %s", bad, r.Stdout)
				}
			}
		}},
	}
}

// ownViewProbe prints, from its first line, the descriptors open in the
// payload (the listing's own is closed again by the time fstat looks), the
// cgroup paths it and PID 1 see, its cpuset's path (where the kernel has
// cpusets) and the cgroup file systems it can see mounted.
const ownViewProbe = `import os; FDS = sorted(int(f) for f in os.listdir("/proc/self/fd"))
def alive(fd):
    try:
        os.fstat(fd); return True
    except OSError:
        return False
print("fds", [fd for fd in FDS if alive(fd)])
for who in ("self", "1"):
    with open("/proc/%s/cgroup" % who) as f:
        print("cgroup", who, sorted(set(line.strip().split(":", 2)[2] for line in f if line.strip())))
try:
    with open("/proc/self/cpuset") as f:
        print("cpuset", f.read().strip())
except FileNotFoundError:
    print("cpuset absent")
with open("/proc/self/mountinfo") as f:
    print("cgroupfs", [l.split()[4] for l in f if l.split(" - ")[1].split()[0] in ("cgroup", "cgroup2")])
`

// ownView asserts what ownViewProbe saw: fds 0-2 only, every cgroup path
// the root of the payload's own cgroup namespace, no cgroup mount, and a
// cpuset path that names no cgroup: "/" (v1, or v2 with cpuset enabled
// down to the jail), or only ".." components on cgroup v2 where the jails'
// subtree has no cpuset controller (the kernel then shows the root
// cgroup's cpuset relative to the namespace: its depth, never a name).
func ownView(t *testing.T, r Result) {
	t.Helper()
	printed("fds [0, 1, 2]\n", "cgroup self ['/']\n", "cgroup 1 ['/']\n", "cgroupfs []\n")(t, r)
	out := string(r.Stdout)
	if strings.Contains(out, "cpuset absent\n") {
		return
	}
	_, after, ok := strings.Cut(out, "cpuset ")
	path, _, _ := strings.Cut(after, "\n")
	if !ok || strings.Trim(strings.ReplaceAll(path, "/..", ""), "/") != "" {
		t.Errorf("the payload's cpuset path names a cgroup outside its namespace:\n%s", out)
	}
}

// without is list less the entries of drop.
func without(list, drop []string) []string {
	var out []string
	for _, e := range list {
		if !slices.Contains(drop, e) {
			out = append(out, e)
		}
	}
	return out
}

// TestHostilePrograms runs every hostile program in a fresh jail, cold and
// warm, and checks its safe outcome, then that nothing of it is left on
// the host.
func TestHostilePrograms(t *testing.T) {
	m := needJail(t)
	t.Setenv("PYEXEC_TEST_SECRET", "s3cr3t-value")
	var cases []hostileCase
	cases = append(cases, fsCases(t)...)
	cases = append(cases, netCases(t)...)
	cases = append(cases, resourceCases()...)
	cases = append(cases, privilegeCases()...)
	cases = append(cases, observerCases()...)
	if len(cases) < 40 {
		t.Fatalf("the suite has %d hostile programs, want at least 40", len(cases))
	}
	// Cold: a jail built for the run. Warm: a jail whose interpreter was
	// started ahead of time and handed the program and its limits, as the
	// warm pool does. Forked: an execution forked from a fork server, which
	// confines itself, then is handed the program and its limits.
	modes := []struct {
		name string
		run  func(t testing.TB, m *Manager, code string, opts ...pyOpt) Result
	}{{"cold", runPy}, {"warm", runWarm}, {"forked", forked(startTemplate(t, m))}}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			before := jailProcesses() // the fork server, which outlives each run
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					r := mode.run(t, m, c.code, c.opts...)
					c.check(t, r)
					if left := processesLeft(before); len(left) > 0 {
						t.Errorf("processes outlived the run: %v", left)
					}
				})
			}
		})
	}
}
