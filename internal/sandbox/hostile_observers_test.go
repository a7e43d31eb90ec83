package sandbox

import "strings"

// observerPrelude names a directory and a file of the interpreter tree,
// which every jail shares read-only, for the observer programs to aim at.
const observerPrelude = syscallPrelude + `
import ctypes, os
shared_dir = os.path.dirname(os.__file__)
shared_file = os.__file__
def path(p): return ctypes.cast(ctypes.c_char_p(p.encode()), ctypes.c_void_p).value
`

// observerCases: ways to watch the shared read-only trees, which would
// show which modules a concurrent run of another caller opens.
func observerCases() []hostileCase {
	obs := func(lines ...string) string { return observerPrelude + strings.Join(lines, "\n") }
	return []hostileCase{
		{"inotify on the shared interpreter tree", obs(
			`fd = libc.inotify_init1(0); e = ctypes.get_errno()`,
			`print("inotify_init1", "DENIED" if fd == -1 and e == errno.EPERM else "ALLOWED fd=%d errno=%d" % (fd, e))`,
			`if "inotify_init" in NR: denied("inotify_init")`,
			`denied("inotify_add_watch", 0, path(shared_dir), 0x20 | 0x1)`, // IN_OPEN | IN_ACCESS
			`denied("inotify_rm_watch", 0, 1)`),
			nil, both(printed("inotify_init1 DENIED", "inotify_add_watch DENIED", "inotify_rm_watch DENIED"), notPrinted("ALLOWED"))},
		{"fanotify on the shared interpreter tree", obs(
			`denied("fanotify_init", 0, 0)`,
			`denied("fanotify_mark", 0, 1, 0x20, -100, path(shared_dir))`), // FAN_MARK_ADD, FAN_OPEN, AT_FDCWD
			nil, both(printed("fanotify_init DENIED", "fanotify_mark DENIED"), notPrinted("ALLOWED"))},
		{"dnotify on the shared interpreter tree, also with high bits set", obs(
			`import fcntl`,
			`d = os.open(shared_dir, os.O_RDONLY)`,
			`try: fcntl.fcntl(d, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT); print("WATCHING")`,
			`except OSError as e: print("dnotify BLOCKED", errno.errorcode[e.errno])`,
			`denied("fcntl", d, fcntl.F_NOTIFY | (1 << 32), fcntl.DN_ACCESS)`,
			`print("getfl ok" if fcntl.fcntl(d, fcntl.F_GETFL) >= 0 else "getfl failed")`),
			nil, both(printed("dnotify BLOCKED EPERM", "fcntl DENIED", "getfl ok"), notPrinted("WATCHING", "ALLOWED"))},
		{"page-cache probes of shared files", obs(
			`f = os.open(shared_file, os.O_RDONLY)`,
			`try: os.preadv(f, [bytearray(16)], 0, os.RWF_NOWAIT); print("PROBED")`,
			`except OSError as e: print("nowait BLOCKED", errno.errorcode[e.errno])`,
			`print("preadv read", os.preadv(f, [bytearray(16)], 0))`,
			`denied("cachestat", f, 0, 0, 0)`),
			nil, both(printed("nowait BLOCKED EPERM", "preadv read 16", "cachestat DENIED"), notPrinted("PROBED", "ALLOWED"))},
		{"reading a shared file changes none of its times", obs(
			`before = os.stat(shared_file)`,
			`open(shared_file, "rb").read()`,
			`after = os.stat(shared_file)`,
			`print("times", "SAME" if (before.st_atime_ns, before.st_mtime_ns, before.st_ctime_ns) == (after.st_atime_ns, after.st_mtime_ns, after.st_ctime_ns) else "CHANGED")`,
			`try: os.utime(shared_file); print("TOUCHED")`,
			`except OSError as e: print("utime BLOCKED", errno.errorcode[e.errno])`),
			nil, both(printed("times SAME", "utime BLOCKED"), notPrinted("TOUCHED", "CHANGED"))},
	}
}
