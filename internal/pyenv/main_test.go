package pyenv

import (
	"os"
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
func jail(t *testing.T) *sandbox.Manager { t.Helper(); return pyenvtest.Jail(t) }

// python returns the interpreter of version ("" for the default) or skips.
func python(t *testing.T, version string) Interpreter {
	t.Helper()
	return pyenvtest.Python(t, version)
}

// pyenvTools installs or finds the pinned uv and ruff.
func pyenvTools(t *testing.T) (uv, ruff string) {
	t.Helper()
	return pyenvtest.Tools(t)
}
