package fleetsess

import (
	"os"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// TestMain lets the test binary serve as the jail's init: the tests run
// real sessions.
func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		os.Exit(sandbox.Init())
	}
	os.Exit(m.Run())
}
