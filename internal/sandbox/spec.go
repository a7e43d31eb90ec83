package sandbox

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox/cgroups"
)

// Spec describes one payload run. Everything the payload sees comes from
// here: nothing of the server's own environment, files or network leaks in.
type Spec struct {
	// Argv is the program and its arguments. Argv[0] is resolved inside the
	// jail, so it must be an absolute path that one of Mounts provides.
	Argv []string
	// Env is the payload's whole environment as KEY=value pairs. The server's
	// environment is never inherited; callers build this from an allowlist.
	Env []string
	// Dir is the working directory inside the jail; empty means WorkDir.
	Dir string
	// Files are written into the workspace (WorkDir) before the payload starts.
	Files []File
	// Mounts are host paths bound read-only into the jail at the same path
	// (an interpreter prefix, a dependency environment).
	Mounts []Mount
	// Network gives the payload a route out through Egress. The jail has
	// a network namespace of its own either way: off, it holds only a
	// loopback interface; on, also the TUN device Egress serves (see
	// Jail.AttachEgress). On without an Egress, there is no route out.
	Network bool
	// Egress serves the route out of a Network jail that Manager.Run
	// starts (cold). It is the caller's: the caller closes it.
	Egress Egress
	// Stdin is fed to the payload's standard input, which is then closed.
	Stdin []byte
	// Limits bound what the payload may consume.
	Limits Limits
	// ResultChannel gives the payload a third output for structured results
	// (the runner's report). It is not inherited: the jail's PID 1 hands it
	// out on the unix socket named by PYEXEC_RELAY in the payload's
	// environment, for each connection, so that the payload can hold it only
	// while it writes (see docs/jail.md; without isolation it is fd 3). Its
	// bytes arrive in Result.Channel, capped at ChannelBytes.
	ResultChannel bool
	// Requests gives the payload fd 4, the read end of a pipe its caller
	// writes to while it runs (Process.Send, HandOff): how a warm
	// interpreter gets its work and a session its cells. The relay serves
	// it too, for a payload that closes fd 4 and fetches it per use.
	Requests bool
	// StreamChannel also hands the result channel's bytes to the
	// OutputFunc as they arrive, as Stream Channel (with ResultChannel).
	StreamChannel bool
	// Collect, when set, returns files the payload leaves in the workspace
	// in Result.Files (see Collect).
	Collect *Collect
	// LiveOnly hands stdout, stderr and the channel to the OutputFunc only:
	// the Result keeps none of them, and neither StdoutBytes, StderrBytes
	// nor ChannelBytes ends or mutes the payload. It is for a payload that
	// lives long and talks a lot (a session), whose caller bounds what it
	// keeps.
	LiveOnly bool
	// Workspace, when set, is a persistent workspace (internal/workspace)
	// mounted at WorkspaceMountDir for this payload: an overlay of its
	// upper directory on its base tree, or the tree read-only. The jail
	// must have a slot for it (Config.WorkspaceSlots); see WorkspaceMount.
	Workspace *WorkspaceMount
}

// systemDirs are bound read-only into every jail: the dynamic loader,
// libc and the system interpreter live here. A path that is a symlink on
// the host (merged /usr) is recreated as the same symlink.
var systemDirs = []string{"/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"}

// ChannelBytes caps what the payload may write to its result channel.
const ChannelBytes = 8 << 20

// WorkDir is the writable workspace inside every jail.
const WorkDir = "/work"

// File is one file written into the workspace before the payload starts.
type File struct {
	// Path is relative to the workspace; it may contain directories but
	// never "..", an absolute prefix or a NUL byte.
	Path string
	Data []byte
	// Mode holds the permission bits; zero means 0644.
	Mode uint32
}

// Mount is a host path made visible inside the jail, read-only unless
// Writable.
type Mount struct {
	// Source is the absolute host path.
	Source string
	// Target is the absolute path inside the jail; empty means Source.
	Target string
	// Writable binds Source writable (still nosuid, nodev) and lets the
	// payload write below it despite Landlock: for a trusted caller's
	// output directory, never for anything a later payload trusts. Its
	// target may not lie under a system directory the jail binds.
	Writable bool
}

// Limits bound one run. Zero values mean the package defaults (see
// DefaultLimits); there is no way to ask for "unlimited".
type Limits struct {
	WallTime        time.Duration // wall clock from payload start to kill
	CPUTime         time.Duration // user+sys CPU of all processes of the jail
	MemoryBytes     int64         // cgroup memory limit, no swap
	Pids            int64         // processes and threads of the jail
	CPUs            float64       // CPU quota in cores (0.5 = half a core)
	WorkspaceBytes  int64         // size of /work (and, separately, of /tmp)
	WorkspaceInodes int64         // inodes of /work (and, separately, of /tmp)
	ShmBytes        int64         // size of /dev/shm
	OpenFiles       int64         // RLIMIT_NOFILE
	FileSizeBytes   int64         // RLIMIT_FSIZE: largest single file
	StdoutBytes     int64         // stdout kept; more ends the run (output_limit)
	StderrBytes     int64         // stderr kept; more ends the run (output_limit)
}

// DefaultLimits returns the limits applied to every zero field of a Spec's
// Limits.
func DefaultLimits() Limits {
	return Limits{
		WallTime:        30 * time.Second,
		CPUTime:         30 * time.Second,
		MemoryBytes:     512 << 20,
		Pids:            128,
		CPUs:            1,
		WorkspaceBytes:  256 << 20,
		WorkspaceInodes: 16384,
		ShmBytes:        64 << 20,
		OpenFiles:       256,
		FileSizeBytes:   128 << 20,
		StdoutBytes:     1 << 20,
		StderrBytes:     1 << 20,
	}
}

// WithDefaults returns l with every zero field taken from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	pick := func(v, def int64) int64 {
		if v == 0 {
			return def
		}
		return v
	}
	out := Limits{
		WallTime:        l.WallTime,
		CPUTime:         l.CPUTime,
		MemoryBytes:     pick(l.MemoryBytes, d.MemoryBytes),
		Pids:            pick(l.Pids, d.Pids),
		CPUs:            l.CPUs,
		WorkspaceBytes:  pick(l.WorkspaceBytes, d.WorkspaceBytes),
		WorkspaceInodes: pick(l.WorkspaceInodes, d.WorkspaceInodes),
		ShmBytes:        pick(l.ShmBytes, d.ShmBytes),
		OpenFiles:       pick(l.OpenFiles, d.OpenFiles),
		FileSizeBytes:   pick(l.FileSizeBytes, d.FileSizeBytes),
		StdoutBytes:     pick(l.StdoutBytes, d.StdoutBytes),
		StderrBytes:     pick(l.StderrBytes, d.StderrBytes),
	}
	if out.WallTime == 0 {
		out.WallTime = d.WallTime
	}
	if out.CPUTime == 0 {
		out.CPUTime = d.CPUTime
	}
	if out.CPUs == 0 {
		out.CPUs = d.CPUs
	}
	return out
}

// cgroup is what l asks of the jail's cgroup.
func (l Limits) cgroup() cgroups.Limits {
	return cgroups.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUs: l.CPUs}
}

// validate reports the first problem with l, after defaults were applied.
func (l Limits) validate() error {
	checks := []struct {
		name string
		bad  bool
	}{
		{"wall time", l.WallTime < 0},
		{"cpu time", l.CPUTime < 0},
		{"memory", l.MemoryBytes < 4<<20},
		{"pids", l.Pids < 1},
		{"cpus", l.CPUs < 0.01},
		{"workspace size", l.WorkspaceBytes < 1<<20},
		{"workspace inodes", l.WorkspaceInodes < 16},
		{"shm size", l.ShmBytes < 0},
		{"open files", l.OpenFiles < 16},
		{"file size", l.FileSizeBytes < 1},
		{"stdout bytes", l.StdoutBytes < 1},
		{"stderr bytes", l.StderrBytes < 1},
	}
	for _, c := range checks {
		if c.bad {
			return fmt.Errorf("%w: %s limit out of range", ErrInvalidSpec, c.name)
		}
	}
	return nil
}

// Validate checks a spec before anything is started. It applies no
// defaults; Run does that.
func (s *Spec) Validate() error {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return fmt.Errorf("%w: empty argv", ErrInvalidSpec)
	}
	if !path.IsAbs(s.Argv[0]) {
		return fmt.Errorf("%w: argv[0] %q is not an absolute path", ErrInvalidSpec, s.Argv[0])
	}
	for _, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: argv contains a NUL byte", ErrInvalidSpec)
		}
	}
	for _, e := range s.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" || strings.IndexByte(e, 0) >= 0 {
			return fmt.Errorf("%w: environment entry %q is not KEY=value", ErrInvalidSpec, e)
		}
	}
	if s.Dir != "" && !path.IsAbs(s.Dir) {
		return fmt.Errorf("%w: working directory %q is not absolute", ErrInvalidSpec, s.Dir)
	}
	for _, f := range s.Files {
		if _, err := cleanInputPath(f.Path); err != nil {
			return err
		}
	}
	for _, m := range s.Mounts {
		if err := m.validate(); err != nil {
			return err
		}
	}
	if err := s.Collect.validate(); err != nil {
		return err
	}
	if err := s.Workspace.validate(); err != nil {
		return err
	}
	if s.Egress != nil && !s.Network {
		return fmt.Errorf("%w: an egress without network", ErrInvalidSpec)
	}
	return s.Limits.WithDefaults().validate()
}

func (m Mount) validate() error {
	if !path.IsAbs(m.Source) || path.Clean(m.Source) != m.Source {
		return fmt.Errorf("%w: mount source %q must be a clean absolute path", ErrInvalidSpec, m.Source)
	}
	t := m.target()
	if !path.IsAbs(t) || path.Clean(t) != t || t == "/" {
		return fmt.Errorf("%w: mount target %q must be a clean absolute path below /", ErrInvalidSpec, t)
	}
	for _, reserved := range []string{"/proc", "/dev", "/etc", WorkDir, "/tmp", WorkspaceMountDir} {
		if t == reserved || strings.HasPrefix(t, reserved+"/") {
			return fmt.Errorf("%w: mount target %q is reserved by the jail", ErrInvalidSpec, t)
		}
	}
	if m.Writable && coveredBy(t, systemDirs) {
		return fmt.Errorf("%w: writable mount target %q lies under a read-only system directory", ErrInvalidSpec, t)
	}
	return nil
}

// coveredBy reports whether p is one of dirs or lies below one.
func coveredBy(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func (m Mount) target() string {
	if m.Target == "" {
		return m.Source
	}
	return m.Target
}

// Bounds on the path of a file written into a workspace. They keep the
// cost of writing an upload proportional to its size (a path of thousands
// of components in a few KiB would otherwise cost a directory per
// component), and stay well under the kernel's PATH_MAX and NAME_MAX.
const (
	MaxPathBytes = 1024 // the whole relative path
	MaxPathDepth = 64   // components, the file's name included
	MaxNameBytes = 255  // one component
)

// CheckPathLimits tells which bound of a workspace path p exceeds, if any.
// It reads p once and stops at the first excess, so it costs no more than
// MaxPathBytes even for a path far beyond them.
func CheckPathLimits(p string) error {
	if len(p) > MaxPathBytes {
		return fmt.Errorf("path is %d bytes long; the limit is %d", len(p), MaxPathBytes)
	}
	depth := 0
	for part := range strings.SplitSeq(p, "/") {
		if part == "" || part == "." {
			continue
		}
		if depth++; depth > MaxPathDepth {
			return fmt.Errorf("path has more than %d components", MaxPathDepth)
		}
		if len(part) > MaxNameBytes {
			return fmt.Errorf("path component of %d bytes; the limit is %d", len(part), MaxNameBytes)
		}
	}
	return nil
}

// cleanInputPath is cleanRelPath for a file to be written: it also holds
// the path to the bounds above.
func cleanInputPath(unsafePath string) (string, error) {
	if err := CheckPathLimits(unsafePath); err != nil {
		return "", fmt.Errorf("%w: file name %.64q...: %w", ErrInvalidSpec, unsafePath, err)
	}
	return cleanRelPath(unsafePath)
}

// cleanRelPath checks an untrusted workspace-relative path and returns it
// cleaned. It rejects absolute paths, "..", empty names and NUL bytes.
func cleanRelPath(unsafePath string) (string, error) {
	if unsafePath == "" || strings.IndexByte(unsafePath, 0) >= 0 {
		return "", fmt.Errorf("%w: invalid file name %q", ErrInvalidSpec, unsafePath)
	}
	if path.IsAbs(unsafePath) {
		return "", fmt.Errorf("%w: file name %q is absolute", ErrInvalidSpec, unsafePath)
	}
	for _, part := range strings.Split(unsafePath, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: file name %q contains \"..\"", ErrInvalidSpec, unsafePath)
		}
	}
	c := path.Clean(unsafePath)
	if c == "." {
		return "", fmt.Errorf("%w: invalid file name %q", ErrInvalidSpec, unsafePath)
	}
	return c, nil
}
