package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pyexec/pyexec/internal/sandbox/cgroups"
	"golang.org/x/sys/unix"
)

// Check is one isolation layer as found on this host.
type Check struct {
	Layer    string `json:"layer"`
	OK       bool   `json:"ok"`
	Required bool   `json:"required"` // a missing required layer stops `serve`
	Detail   string `json:"detail"`
}

// Probe inspects the host for every layer the jail uses, without starting
// a jail. `pyexec doctor` prints it; `pyexec serve` refuses to start when a
// required layer is missing.
func Probe(cfg Config) []Check {
	var out []Check
	add := func(layer string, required bool, err error, ok string) {
		c := Check{Layer: layer, OK: err == nil, Required: required, Detail: ok}
		if err != nil {
			c.Detail = err.Error()
		}
		out = append(out, c)
	}
	root := os.Geteuid() == 0
	for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		_, err := os.Stat("/proc/self/ns/" + ns)
		add("namespace "+ns, true, err, "available")
	}
	add("user namespaces", !root, probeUserns(), userDetail(root))
	cgDetail, cgErr := probeCgroups(cfg)
	add("cgroups", !cfg.Disable.NoCgroups, cgErr, cgDetail)
	add("seccomp", !cfg.Disable.NoSeccomp, probeSeccomp(), "filter mode available")
	abi := landlockABI()
	var llErr error
	if abi == 0 {
		llErr = errors.New("not enabled in this kernel (best effort: the jail runs without it)")
	}
	add("landlock", false, llErr, fmt.Sprintf("ABI version %d", abi))
	add("mount_setattr", true, probeMountSetattr(), "recursive read-only bind mounts")
	return out
}

func userDetail(root bool) string {
	if root {
		return "available (not needed: the server runs as root)"
	}
	return "available: jails run in a new user namespace"
}

func probeUserns() error {
	b, err := os.ReadFile("/proc/sys/user/max_user_namespaces")
	if err != nil {
		return fmt.Errorf("cannot read max_user_namespaces: %w", err)
	}
	if strings.TrimSpace(string(b)) == "0" {
		return errors.New("disabled (user.max_user_namespaces = 0)")
	}
	return nil
}

// probeCgroups sets up the jails' cgroup parent as `serve` would (on
// cgroup v2 that moves this process into its leaf) and creates and removes
// one jail cgroup. It returns what it found, or why jails cannot be
// confined with the fix.
func probeCgroups(cfg Config) (string, error) {
	if cfg.Disable.NoCgroups {
		return "", errors.New("disabled by the operator")
	}
	parent := cfg.CgroupParent
	if parent == "" {
		parent = "pyexec"
	}
	return cgroups.Probe(parent, "probe-"+newID(), DefaultLimits().cgroup())
}

func probeSeccomp() error {
	// PR_GET_SECCOMP succeeds on any kernel built with seccomp.
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("not supported by the kernel: %w", err)
	}
	if _, err := buildFilter(); err != nil {
		return err
	}
	return nil
}

func probeMountSetattr() error {
	// An invalid call distinguishes "absent" (ENOSYS) from "present".
	err := unix.MountSetattr(-1, "", 0, &unix.MountAttr{})
	if errors.Is(err, unix.ENOSYS) {
		return errors.New("mount_setattr is missing (Linux 5.12 or newer is needed)")
	}
	return nil
}
