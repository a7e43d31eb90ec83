package runnertest

import (
	"strings"
	"testing"
)

// OwnViewProbe is user code that reports, from its first line, what it
// was started with: its open descriptors (stdio apart, each with its kind
// and whether it is close-on-exec), those a program it executes gets, the
// cgroup paths it and PID 1 see, and the cgroup file systems mounted in its
// view. CheckOwnView judges the output.
const OwnViewProbe = `import os; FDS = [int(f) for f in os.listdir("/proc/self/fd")]
import fcntl, subprocess, sys
OPEN = 'import os; print(sorted(f for f in map(int, os.listdir("/proc/self/fd")) if os.path.exists("/proc/self/fd/%d" % f)))'
own = sorted(f for f in FDS if os.path.exists("/proc/self/fd/%d" % f))
print("stdio", [f for f in own if f <= 2])
print("driver", [(os.readlink("/proc/self/fd/%d" % f).split(":")[0], bool(fcntl.fcntl(f, fcntl.F_GETFD) & fcntl.FD_CLOEXEC))
                 for f in own if f > 2])
print("child", subprocess.run([sys.executable, "-c", OPEN], stdout=subprocess.PIPE, universal_newlines=True).stdout.strip())
for who in ("self", "1"):
    with open("/proc/%s/cgroup" % who) as f:
        print("cgroup", who, sorted(set(line.strip().split(":", 2)[2] for line in f if line.strip())))
with open("/proc/self/mountinfo") as f:
    print("cgroupfs", [l.split()[4] for l in f if l.split(" - ")[1].split()[0] in ("cgroup", "cgroup2")])
`

// CheckOwnView fails t unless stdout, what OwnViewProbe printed, shows user
// code started with fds 0-2 only (the driver fetches its pipes for each
// use and holds none while user code runs), in a cgroup namespace rooted
// at its own cgroup with no cgroup mount in view.
func CheckOwnView(t testing.TB, stdout string) {
	t.Helper()
	for _, want := range []string{"stdio [0, 1, 2]", "driver []", "child [0, 1, 2]",
		"cgroup self ['/']", "cgroup 1 ['/']", "cgroupfs []"} {
		if !strings.Contains(stdout, want+"\n") {
			t.Errorf("user code's view lacks %q:\n%s", want, stdout)
		}
	}
}
