package sandbox

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the jail's init, as the pyexec
// binary does: the parent re-executes /proc/self/exe with InitArg.
func TestMain(m *testing.M) {
	if IsInit() {
		os.Exit(Init())
	}
	os.Exit(m.Run())
}
