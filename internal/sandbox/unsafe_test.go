package sandbox

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestUnsafeModeRunsWithRlimitsOnly: --unsafe-no-isolation still runs the
// payload as the sandbox user in a private workspace with rlimits, timeouts
// and output caps, and removes the workspace afterwards.
func TestUnsafeModeRunsWithRlimitsOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop to the sandbox user")
	}
	m, err := New(Config{Unsafe: true, CgroupParent: testParent})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Run(context.Background(), Spec{
		Argv:  []string{python, "-c", "import os; print(os.getuid(), open('data.txt').read(), os.getcwd().startswith('/work'))"},
		Files: []File{{Path: "data.txt", Data: []byte("payload")}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusOK || string(res.Stdout) != "65534 payload False\n" {
		t.Fatalf("status %s (%s) stdout %q stderr %s", res.Status, res.Reason, res.Stdout, res.Stderr)
	}
	res, err = m.Run(context.Background(), Spec{
		Argv: []string{python, "-c", "import time; print('x', flush=True); time.sleep(30)"},
		// Long enough for the interpreter to start and print under
		// emulation (make test-vm), short against the 30 s sleep.
		Limits: Limits{WallTime: 5 * time.Second},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusTimeout || !strings.HasPrefix(string(res.Stdout), "x") {
		t.Fatalf("timeout in unsafe mode: status %s stdout %q", res.Status, res.Stdout)
	}
	res, err = m.Run(context.Background(), Spec{Argv: []string{python, "-c", "print('ran')"}, Network: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusSetupError || len(res.Stdout) != 0 {
		t.Fatalf("network in unsafe mode: status %s stdout %q, want a setup error before the payload runs", res.Status, res.Stdout)
	}
}
