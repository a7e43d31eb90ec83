package interp

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An interpreter that answers only when given more time is used: a first
// start on a loaded host must not leave the server without Python.
func TestProbeThatRanOutOfTimeIsTriedWithTheLongerBound(t *testing.T) {
	var seen []time.Duration
	err := withRetryOnTimeout(context.Background(), []time.Duration{time.Hour, 2 * time.Hour}, func(ctx context.Context) error {
		deadline, _ := ctx.Deadline()
		seen = append(seen, time.Until(deadline).Round(time.Hour))
		if len(seen) == 1 {
			return errProbeTimeout
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the second attempt answered, yet: %v", err)
	}
	if len(seen) != 2 || seen[0] != time.Hour || seen[1] != 2*time.Hour {
		t.Fatalf("attempts had bounds %v, want [1h 2h]", seen)
	}
}

// A broken interpreter fails at once: only running out of time earns a
// second attempt, and a caller that gives up is not kept waiting.
func TestProbeFailureOtherThanTimeIsFinal(t *testing.T) {
	broken := errors.New("exit status 1")
	calls := 0
	err := withRetryOnTimeout(context.Background(), probeBounds[:], func(context.Context) error {
		calls++
		return broken
	})
	if !errors.Is(err, broken) || calls != 1 {
		t.Fatalf("got %v after %d attempts, want the failure after 1", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = withRetryOnTimeout(ctx, probeBounds[:], func(context.Context) error {
		calls++
		cancel()
		return errProbeTimeout
	})
	if !errors.Is(err, errProbeTimeout) || calls != 1 {
		t.Fatalf("caller gone: got %v after %d attempts, want 1 attempt", err, calls)
	}

	calls = 0
	err = withRetryOnTimeout(context.Background(), []time.Duration{time.Millisecond, time.Millisecond}, func(context.Context) error {
		calls++
		return errProbeTimeout
	})
	if !errors.Is(err, errProbeTimeout) || calls != 2 {
		t.Fatalf("never answering: got %v after %d attempts, want the timeout after 2", err, calls)
	}
}
