package fleetsess

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
)

// TestWireKeepsTheSentinels: an engine error of another node comes back
// with its text and its sentinel, so that a node answers a forwarded call
// with the status the holder would (409 for a fork whose interpreter
// ended loading, and not 500).
func TestWireKeepsTheSentinels(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			err := fmt.Errorf("ses_1: %w: how", k.err)
			w := encodeError(err)
			got := w.decode("node-b")
			if w.Kind != k.name || !errors.Is(got, k.err) || got.Error() != err.Error() {
				t.Errorf("%v travelled as %q and came back as %v", err, w.Kind, got)
			}
		})
	}
}

// TestWireSaysEndedBeforeForkEnded: a fork in which both interpreters
// ended ends the parent too, so the caller learns that the session ended,
// not that it stayed as it was.
func TestWireSaysEndedBeforeForkEnded(t *testing.T) {
	err := fmt.Errorf("%w: ses_1: both: %w", engine.ErrSessionEnded, engine.ErrSessionForkEnded)
	if w := encodeError(err); w.Kind != "session_ended" {
		t.Errorf("%v travelled as %q, want session_ended", err, w.Kind)
	}
}
