package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// newRootMount is where init mounts the jail's root before pivoting into
// it. It is a path of init's private mount namespace: mounting over the
// host's /tmp there changes nothing on the host.
const newRootMount = "/tmp"

// devices are bound from the host into the jail's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom"}

// procMasked are hidden behind /dev/null; procReadOnly are made read-only.
// A file a payload could write to is never masked, only made read-only:
// /dev/null over it would take the write and report success.
var (
	procMasked   = []string{"kcore", "keys", "timer_list", "sched_debug", "kallsyms"}
	procReadOnly = []string{"sys", "bus", "fs", "irq", "sysrq-trigger"}
)

// step wraps an error with the name of the setup step that failed.
func step(name string, err error) error {
	if err == nil {
		return nil
	}
	return &initError{Step: name, Message: err.Error()}
}

// buildRoot builds the jail's filesystem and pivots into it. It runs in
// init, in fresh mount, pid, ipc and uts namespaces.
func buildRoot(s *setupMsg) error {
	// The workspace slot is taken first, while it is still a peer of the
	// host's: a slave of it receives what the server mounts there later.
	slot := -1
	if s.Slot != "" {
		fd, err := openSlot(s.Slot)
		if err != nil {
			return step("workspace slot", err)
		}
		defer unix.Close(fd)
		slot = fd
	}
	// Nothing we mount may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return step("make mounts private", os.NewSyscallError("mount", err))
	}
	// The root tmpfs hides the host's /tmp (newRootMount): hold every
	// mount source open first and bind it through its descriptor, so a
	// source may live anywhere, under /tmp too.
	srcs := make([]string, len(s.Mounts))
	for i, m := range s.Mounts {
		fd, err := unix.Open(m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return step("open "+m.Source, os.NewSyscallError("open", err))
		}
		defer unix.Close(fd)
		srcs[i] = fmt.Sprintf("/proc/self/fd/%d", fd)
	}
	root := newRootMount
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4m,nr_inodes=4096,mode=0755"); err != nil {
		return step("mount root tmpfs", os.NewSyscallError("mount", err))
	}
	var bound []string
	for _, d := range systemDirs {
		if err := bindSystem(root, d); err != nil {
			return step("bind "+d, err)
		}
		bound = append(bound, d)
	}
	for i, m := range s.Mounts {
		t := m.target()
		if m.Source == t && coveredBy(t, bound) {
			continue // already visible through a system directory
		}
		bind := bindReadOnly
		if m.Writable {
			bind = bindWritable
		}
		if err := bind(srcs[i], filepath.Join(root, t)); err != nil {
			return step("bind "+m.Source, err)
		}
		bound = append(bound, t)
	}
	if err := writeEtc(root, s); err != nil {
		return step("write /etc", err)
	}
	if err := buildDev(root); err != nil {
		return step("build /dev", err)
	}
	if err := buildProc(root); err != nil {
		return step("mount /proc", err)
	}
	for _, d := range []string{WorkDir, "/tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return step("create "+d, err)
		}
	}
	if slot >= 0 {
		if err := attachSlot(slot, root); err != nil {
			return step("workspace slot", err)
		}
	}
	if err := pivot(root); err != nil {
		return step("pivot_root", err)
	}
	// The root itself is read-only from here on; /work, /tmp and /dev/shm
	// are mounted over it when the payload is known.
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return step("remount root read-only", os.NewSyscallError("mount", err))
	}
	if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
		return step("sethostname", os.NewSyscallError("sethostname", err))
	}
	if err := loopbackUp(); err != nil {
		return step("bring up loopback", err)
	}
	return nil
}

// bindSystem binds one system directory, mirroring a host symlink as a
// symlink; a directory the host lacks is skipped.
func bindSystem(root, dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(dir)
		if err != nil {
			return err
		}
		return os.Symlink(target, filepath.Join(root, dir))
	}
	return bindReadOnly(dir, filepath.Join(root, dir))
}

// bindReadOnly binds src (recursively) at dst and makes the whole tree
// read-only, nosuid and nodev in one mount_setattr call, so no submount
// stays writable.
func bindReadOnly(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		err = os.MkdirAll(dst, 0o755)
	} else {
		err = touch(dst)
	}
	if err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return os.NewSyscallError("mount", err)
	}
	return makeReadOnly(dst, true)
}

// bindWritable binds src (recursively) at dst, writable but nosuid and
// nodev throughout.
func bindWritable(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return os.NewSyscallError("mount", err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(-1, dst, unix.AT_RECURSIVE, &attr); err != nil {
		return os.NewSyscallError("mount_setattr", err)
	}
	return nil
}

func makeReadOnly(path string, recursive bool) error {
	flags := 0
	if recursive {
		flags = unix.AT_RECURSIVE
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(-1, path, uint(flags), &attr); err != nil {
		return os.NewSyscallError("mount_setattr", err)
	}
	return nil
}

func touch(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// fontsConf is the jail's fontconfig configuration: the system font
// directories (bound read-only with /usr) and a cache in the jail's own
// /tmp. Without one, every program that asks fontconfig (matplotlib runs
// fc-list when it builds its font list) prints "Fontconfig error: Cannot
// load default config file" to the payload's stderr.
const fontsConf = `<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <dir>/usr/share/fonts</dir>
  <dir>/usr/local/share/fonts</dir>
  <cachedir>/tmp/.cache/fontconfig</cachedir>
</fontconfig>
`

// writeEtc writes a synthetic /etc: no host file with secrets or the host's
// name is ever visible. With network on, DNS configuration and CA
// certificates are added.
func writeEtc(root string, s *setupMsg) error {
	etc := filepath.Join(root, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"passwd":        fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:%d:%d:sandbox:%s:/bin/sh\n", s.UID, s.GID, WorkDir),
		"group":         fmt.Sprintf("root:x:0:\nsandbox:x:%d:\n", s.GID),
		"hosts":         fmt.Sprintf("127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost\n", s.Hostname),
		"hostname":      s.Hostname + "\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
	}
	if s.Network {
		// The egress answers names itself (docs/network.md): the host's
		// resolvers are never visible, let alone reachable.
		files["resolv.conf"] = "nameserver " + EgressDNSAddr4.String() + "\noptions attempts:2 timeout:2\n"
	}
	if err := os.Mkdir(filepath.Join(etc, "fonts"), 0o755); err != nil {
		return err
	}
	files["fonts/fonts.conf"] = fontsConf
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if s.Network {
		if _, err := os.Stat("/etc/ssl"); err == nil {
			if err := bindReadOnly("/etc/ssl", filepath.Join(etc, "ssl")); err != nil {
				return err
			}
		}
	}
	return nil
}

// buildDev makes a minimal /dev: a few harmless devices bound from the
// host, the usual symlinks, and a mount point for /dev/shm.
func buildDev(root string) error {
	dev := filepath.Join(root, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755"); err != nil {
		return os.NewSyscallError("mount", err)
	}
	for _, d := range devices {
		p := filepath.Join(dev, d)
		if err := touch(p); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+d, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", d, os.NewSyscallError("mount", err))
		}
	}
	links := map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return os.Mkdir(filepath.Join(dev, "shm"), 0o755)
}

// buildProc mounts a proc of the jail's own pid namespace and hides the
// files that expose kernel memory, keys or timers of the host.
func buildProc(root string) error {
	proc := filepath.Join(root, "proc")
	if err := os.MkdirAll(proc, 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return os.NewSyscallError("mount", err)
	}
	for _, name := range procMasked {
		p := filepath.Join(proc, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask /proc/%s: %w", name, os.NewSyscallError("mount", err))
		}
	}
	for _, name := range procReadOnly {
		p := filepath.Join(proc, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind /proc/%s: %w", name, os.NewSyscallError("mount", err))
		}
		if err := makeReadOnly(p, true); err != nil {
			return fmt.Errorf("read-only /proc/%s: %w", name, err)
		}
	}
	return nil
}

// pivot makes root the new "/" and detaches the old root entirely, so no
// path inside the jail leads back to the host's filesystem.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return os.NewSyscallError("chdir", err)
	}
	// pivot_root(".", ".") stacks the old root on top of the new one; the
	// lazy unmount of "." then removes it.
	if err := unix.PivotRoot(".", "."); err != nil {
		return os.NewSyscallError("pivot_root", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return os.NewSyscallError("umount", err)
	}
	return os.NewSyscallError("chdir", unix.Chdir("/"))
}

// mountScratch mounts the writable, size- and inode-capped tmpfs mounts
// once the payload's limits are known.
func mountScratch(l Limits, uid, gid int) error {
	mounts := []struct {
		dir, opts string
		flags     uintptr
	}{
		{WorkDir, fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755,uid=%d,gid=%d", l.WorkspaceBytes, l.WorkspaceInodes, uid, gid), unix.MS_NOSUID | unix.MS_NODEV},
		{"/tmp", fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", l.WorkspaceBytes, l.WorkspaceInodes), unix.MS_NOSUID | unix.MS_NODEV},
		{"/dev/shm", fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", max(l.ShmBytes, 4096), l.WorkspaceInodes), unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
	}
	for _, m := range mounts {
		if err := unix.Mount("tmpfs", m.dir, "tmpfs", m.flags, m.opts); err != nil {
			return step("mount "+m.dir, os.NewSyscallError("mount", err))
		}
	}
	// /dev itself stays read-only: only /dev/shm below it is writable.
	return step("read-only /dev", makeReadOnly("/dev", false))
}

// loopbackUp brings up "lo" in the jail's own network namespace, so
// programs that talk to themselves over 127.0.0.1 work.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return os.NewSyscallError("ioctl(SIOCGIFFLAGS)", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return os.NewSyscallError("ioctl(SIOCSIFFLAGS)", unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr))
}
