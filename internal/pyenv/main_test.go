package pyenv

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// TestMain lets the test binary serve as the jail's init for the tests
// that run real jails (import detection, environments, lint).
func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		os.Exit(sandbox.Init())
	}
	os.Exit(m.Run())
}

// jail returns the real jail, or skips the test with the reason.
func jail(t *testing.T) *sandbox.Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the jail builds namespaces, cgroups and mounts")
	}
	m, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatalf("sandbox.New: %v", err)
	}
	return m
}

// hostPythons discovers this machine's interpreters once per test binary.
var hostPythons = sync.OnceValues(func() (*Interpreters, error) {
	return Discover(context.Background(), OptionsFromEnv(os.Getenv))
})

// python returns the interpreter of version ("" for the default) or skips.
func python(t *testing.T, version string) Interpreter {
	t.Helper()
	set, err := hostPythons()
	if err != nil {
		t.Skipf("no interpreters: %v", err)
	}
	in, err := set.Lookup(version)
	if err != nil {
		t.Skipf("Python %s is not installed: %v", version, err)
	}
	return in
}

// pyenvTools installs or finds the pinned uv and ruff.
func pyenvTools(t *testing.T) (uv, ruff string) {
	t.Helper()
	return pyenvtest.Tools(t)
}
