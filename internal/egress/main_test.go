package egress

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// worldEnv marks the copy of the test binary that runs in a network
// namespace of its own (see TestMain).
const worldEnv = "PYEXEC_EGRESS_TEST_WORLD"

// TestMain serves as the jails' init, as the pyexec binary does. As root
// it runs the whole suite again in a fresh network namespace, which holds
// only loopback and the test's own hosts (world_test.go): whatever the
// egress under test does, no packet can leave this machine.
func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		os.Exit(sandbox.Init())
	}
	if os.Geteuid() != 0 || os.Getenv(worldEnv) != "" {
		os.Exit(m.Run())
	}
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Env = append(os.Environ(), worldEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "running the suite in its own network namespace:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func pid() int { return os.Getpid() }
