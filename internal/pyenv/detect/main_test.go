package detect

import (
	"os"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// TestMain lets the test binary serve as the jail's init for the tests
// that run the detector.
func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		os.Exit(sandbox.Init())
	}
	os.Exit(m.Run())
}
