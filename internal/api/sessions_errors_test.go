package api

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
)

// TestForkWhoseParentEndedTooIsGone: a fork in which both interpreters
// ended ends the parent too, so the answer is 410, not the 409 that says
// the session stayed as it was.
func TestForkWhoseParentEndedTooIsGone(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{fmt.Errorf("%w: ses_1: both: %w", engine.ErrSessionEnded, engine.ErrSessionForkEnded), http.StatusGone},
		{fmt.Errorf("ses_1: %w", engine.ErrSessionForkEnded), http.StatusConflict},
	}
	for _, c := range cases {
		var e *Error
		if !errors.As(sessionError(nil, c.err), &e) || e.Status != c.want {
			t.Errorf("%v answered %v, want %d", c.err, e, c.want)
		}
	}
}
