package egress

import (
	"fmt"
	"os"
	"testing"

	"github.com/pyexec/pyexec/internal/egress/egresstest"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// TestMain serves as the jails' init, as the pyexec binary does. As root
// it runs the whole suite again in a fresh network namespace, which holds
// only loopback and the test's own hosts (egresstest): whatever the
// egress under test does, no packet can leave this machine.
func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		os.Exit(sandbox.Init())
	}
	if os.Geteuid() != 0 || egresstest.Isolated() {
		os.Exit(m.Run())
	}
	// The namespace the suite runs in cannot reach PyPI.
	if dir, err := egresstest.InstallClients(); err != nil {
		fmt.Fprintln(os.Stderr, "tests of requests and httpx will be skipped:", err)
	} else {
		os.Setenv(egresstest.ClientsEnv, dir)
	}
	code, err := egresstest.Isolate(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "running the suite in its own network namespace:", err)
	}
	os.Exit(code)
}

func pid() int { return os.Getpid() }
