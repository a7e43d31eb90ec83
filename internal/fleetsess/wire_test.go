package fleetsess

import (
	"errors"
	"fmt"
	"testing"
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
