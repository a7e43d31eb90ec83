package pyenvtest

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/pyexec/pyexec/internal/pyenv/interp"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Jail returns the real jail, or skips the test with the reason. The test
// binary must serve as the jail's init (sandbox.IsInit in its TestMain).
func Jail(t testing.TB) *sandbox.Manager {
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
var hostPythons = sync.OnceValues(func() (*interp.Interpreters, error) {
	return interp.Discover(context.Background(), interp.OptionsFromEnv(os.Getenv))
})

// Python returns the host's interpreter of version ("" for the default),
// or skips the test.
func Python(t testing.TB, version string) interp.Interpreter {
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
