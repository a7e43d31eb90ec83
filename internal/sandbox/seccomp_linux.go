package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter is a denylist: the payload is an ordinary Python
// program, so everything a normal process needs stays allowed, and what only
// an attacker needs (kernel attack surface, other processes' memory, new
// namespaces, foreign syscall ABIs) is refused.
//
// The filter is written with x/net/bpf rather than go-seccomp-bpf's policy
// assembler for two reasons: a syscall of a foreign architecture must be
// killed (that assembler lets it fall through to the default action), and
// int-typed arguments (ioctl request, socket family) must be compared on
// their low 32 bits only, as the kernel reads them; a 64-bit comparison is
// bypassed by setting the high bits. go-seccomp-bpf still provides the
// syscall tables.

// deniedSyscalls fail with EPERM. Names missing from the architecture's
// table (e.g. i386-only calls) are skipped.
var deniedSyscalls = []string{
	// other processes' memory and tracing
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
	// mounts and roots
	"mount", "umount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount",
	"open_tree", "open_tree_attr", "fsopen", "fsconfig", "fsmount", "fspick",
	// namespaces
	"setns",
	// kernel keyrings, BPF, perf, userfaultfd, io_uring
	"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// file handles (CVE-2014-9357-style escapes through open_by_handle_at)
	"open_by_handle_at", "name_to_handle_at",
	// kernel images and modules
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"create_module", "query_module", "get_kernel_syms",
	// machine state
	"reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog",
	"sethostname", "setdomainname", "vhangup", "lookup_dcookie", "nfsservctl", "uselib",
	"iopl", "ioperm", "vm86", "vm86old",
	// watching files: the interpreter and environment trees are shared
	// read-only by every jail, so a watch (or a page-cache probe) on them
	// would show which modules a concurrent run of another caller opens
	"fanotify_init", "fanotify_mark", "inotify_init", "inotify_init1", "inotify_add_watch",
	"inotify_rm_watch", "cachestat",
	// clocks
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
}

// nsFlags are the clone/unshare flags that create namespaces.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// seccomp_data offsets: nr, arch, then 64-bit args from offset 16. The
// low half of an argument is at its offset on little-endian machines,
// which are the only ones we build the filter for.
const (
	offNr   = 0
	offArch = 4
)

func offArgLo(i int) uint32 { return uint32(16 + 8*i) }

// Return values of a seccomp filter.
const (
	retAllow       = unix.SECCOMP_RET_ALLOW
	retKillProcess = unix.SECCOMP_RET_KILL_PROCESS
	retErrno       = unix.SECCOMP_RET_ERRNO
)

// filterAsm is a tiny assembler with named labels; jumps are resolved at
// the end, since classic BPF only jumps forward by a count.
type filterAsm struct {
	ins    []bpf.Instruction
	labels map[string]int
	jumps  []pendingJump
}

type pendingJump struct {
	at            int
	onTrue        string // label, "" = next instruction
	onFalse       string
	cond          bpf.JumpTest
	val           uint32
	unconditional bool
}

func (a *filterAsm) load(off uint32) {
	a.ins = append(a.ins, bpf.LoadAbsolute{Off: off, Size: 4})
}

func (a *filterAsm) ret(v uint32) { a.ins = append(a.ins, bpf.RetConstant{Val: v}) }

func (a *filterAsm) jumpIf(cond bpf.JumpTest, val uint32, onTrue, onFalse string) {
	a.jumps = append(a.jumps, pendingJump{at: len(a.ins), cond: cond, val: val, onTrue: onTrue, onFalse: onFalse})
	a.ins = append(a.ins, nil)
}

func (a *filterAsm) jump(to string) {
	a.jumps = append(a.jumps, pendingJump{at: len(a.ins), onTrue: to, unconditional: true})
	a.ins = append(a.ins, nil)
}

func (a *filterAsm) label(name string) { a.labels[name] = len(a.ins) }

func (a *filterAsm) assemble() ([]bpf.RawInstruction, error) {
	skip := func(from int, label string) (int, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := a.labels[label]
		if !ok {
			return 0, fmt.Errorf("seccomp filter: undefined label %q", label)
		}
		d := to - from - 1
		if d < 0 {
			return 0, fmt.Errorf("seccomp filter: backward jump to %q", label)
		}
		return d, nil
	}
	for _, j := range a.jumps {
		t, err := skip(j.at, j.onTrue)
		if err != nil {
			return nil, err
		}
		if j.unconditional {
			a.ins[j.at] = bpf.Jump{Skip: uint32(t)}
			continue
		}
		f, err := skip(j.at, j.onFalse)
		if err != nil {
			return nil, err
		}
		if t > 255 || f > 255 {
			return nil, fmt.Errorf("seccomp filter: jump too long")
		}
		a.ins[j.at] = bpf.JumpIf{Cond: j.cond, Val: j.val, SkipTrue: uint8(t), SkipFalse: uint8(f)}
	}
	return bpf.Assemble(a.ins)
}

// buildFilter assembles the payload's seccomp program for the running
// architecture.
func buildFilter() ([]bpf.RawInstruction, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	nr := func(name string) (uint32, bool) {
		n, ok := info.SyscallNames[name]
		return uint32(n), ok
	}
	a := &filterAsm{labels: map[string]int{}}

	// A foreign architecture (i386 int 0x80 on amd64, say) gets different
	// syscall numbers: kill it outright.
	a.load(offArch)
	a.jumpIf(bpf.JumpEqual, uint32(info.ID), "native", "")
	a.ret(retKillProcess)
	a.label("native")
	a.load(offNr)
	if info.ID == arch.X86_64.ID { // x32 ABI: same arch value, numbers flagged with a high bit
		a.jumpIf(bpf.JumpGreaterOrEqual, uint32(arch.X32.SeccompMask), "kill", "")
	}
	for _, name := range deniedSyscalls {
		if n, ok := nr(name); ok {
			a.jumpIf(bpf.JumpEqual, n, "eperm", "")
		}
	}
	// clone3 passes its flags in memory, which a filter cannot read: make it
	// look absent so libc falls back to clone, whose flags we can check.
	if n, ok := nr("clone3"); ok {
		a.jumpIf(bpf.JumpEqual, n, "enosys", "")
	}
	argRules := []struct {
		name, label string
	}{{"clone", "clone"}, {"unshare", "clone"}, {"ioctl", "ioctl"}, {"socket", "socket"}, {"socketpair", "socketpair"}, {"personality", "personality"},
		{"fcntl", "fcntl"}, {"preadv2", "preadv2"}}
	for _, r := range argRules {
		if n, ok := nr(r.name); ok {
			a.jumpIf(bpf.JumpEqual, n, r.label, "")
		}
	}
	a.ret(retAllow)

	// clone/unshare: no namespace flags (arg 0 on every architecture).
	a.label("clone")
	a.load(offArgLo(0))
	a.jumpIf(bpf.JumpBitsSet, nsFlags, "eperm", "allow")

	// ioctl: no faking terminal input or console control (the request
	// argument is an unsigned int: compare the low word only).
	a.label("ioctl")
	a.load(offArgLo(1))
	a.jumpIf(bpf.JumpEqual, unix.TIOCSTI, "eperm", "")
	a.jumpIf(bpf.JumpEqual, unix.TIOCLINUX, "eperm", "allow")

	// socket: unix, IPv4, IPv6, and netlink route only (for getaddrinfo and
	// interface listing); no packet, raw-link, vsock or other families.
	a.label("socket")
	a.load(offArgLo(0))
	a.jumpIf(bpf.JumpEqual, unix.AF_UNIX, "allow", "")
	a.jumpIf(bpf.JumpEqual, unix.AF_INET, "allow", "")
	a.jumpIf(bpf.JumpEqual, unix.AF_INET6, "allow", "")
	a.jumpIf(bpf.JumpEqual, unix.AF_NETLINK, "", "eafnosupport")
	a.load(offArgLo(2))
	a.jumpIf(bpf.JumpEqual, unix.NETLINK_ROUTE, "allow", "eafnosupport")

	a.label("socketpair")
	a.load(offArgLo(0))
	a.jumpIf(bpf.JumpEqual, unix.AF_UNIX, "allow", "eafnosupport")

	// personality: only the query and the default persona (no
	// ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC).
	a.label("personality")
	a.load(offArgLo(0))
	a.jumpIf(bpf.JumpEqual, 0, "allow", "")
	a.jumpIf(bpf.JumpEqual, 0xffffffff, "allow", "eperm")

	// fcntl: no F_NOTIFY (dnotify), the oldest way to watch a directory of
	// the shared trees (the command is an unsigned int: low word only).
	a.label("fcntl")
	a.load(offArgLo(1))
	a.jumpIf(bpf.JumpEqual, unix.F_NOTIFY, "eperm", "allow")

	// preadv2: no RWF_NOWAIT, which fails fast on a page not in the page
	// cache and so tells which shared files another run has read (the
	// flags are arg 5 on every 64-bit architecture).
	a.label("preadv2")
	a.load(offArgLo(5))
	a.jumpIf(bpf.JumpBitsSet, unix.RWF_NOWAIT, "eperm", "allow")

	a.label("allow")
	a.ret(retAllow)
	a.label("eperm")
	a.ret(retErrno | uint32(unix.EPERM))
	a.label("enosys")
	a.ret(retErrno | uint32(unix.ENOSYS))
	a.label("eafnosupport")
	a.ret(retErrno | uint32(unix.EAFNOSUPPORT))
	a.label("kill")
	a.ret(retKillProcess)
	return a.assemble()
}

// filterBytes is the filter as the kernel's struct sock_filter array, in
// the host's byte order, for a fork server's executions to load.
func filterBytes(raw []bpf.RawInstruction) []byte {
	b := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		b = binary.NativeEndian.AppendUint16(b, r.Op)
		b = append(b, r.Jt, r.Jf)
		b = binary.NativeEndian.AppendUint32(b, r.K)
	}
	return b
}

// loadSeccomp installs the filter on every thread of the calling process
// (TSYNC) and sets no_new_privs first, which an unprivileged filter needs.
// It is the last step before the payload is forked and exec'd: every
// syscall after it is checked, so nothing may follow that the filter denies.
func loadSeccomp(raw []bpf.RawInstruction) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_SET_NO_NEW_PRIVS)", err)
	}
	filters := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filters[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return os.NewSyscallError("seccomp", errno)
	}
	if tid != 0 { // TSYNC names the thread it could not synchronise
		return fmt.Errorf("seccomp: thread %d could not be synchronised", tid)
	}
	return nil
}
