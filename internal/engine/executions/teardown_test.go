package executions

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// slowEgress is an egress whose teardown waits for release.
type slowEgress struct {
	release chan struct{}
	done    *atomic.Int64
}

func (s slowEgress) Finish() func() error {
	return func() error {
		<-s.release
		s.done.Add(1)
		return nil
	}
}

// TestTeardownsAfterTheAnswer: finishing an execution's egress does not
// wait for its teardown, up to maxTeardowns at once; past them an
// execution tears its own down before it goes on; wait returns only once
// every teardown is over.
func TestTeardownsAfterTheAnswer(t *testing.T) {
	td := newTeardowns(slog.New(slog.DiscardHandler))
	release := make(chan struct{})
	var done atomic.Int64
	for range maxTeardowns {
		returned := make(chan struct{})
		go func() { td.finish("x", slowEgress{release: release, done: &done}); close(returned) }()
		select {
		case <-returned:
		case <-time.After(5 * time.Second):
			t.Fatal("finish waited for the teardown")
		}
	}
	over := make(chan struct{})
	go func() { td.finish("y", slowEgress{release: release, done: &done}); close(over) }()
	select {
	case <-over:
		t.Fatal("a teardown past maxTeardowns went to the background")
	case <-time.After(100 * time.Millisecond):
	}
	waited := make(chan struct{})
	go func() { td.wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("wait returned while teardowns were pending")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-over
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return once the teardowns were over")
	}
	if n := done.Load(); n != maxTeardowns+1 {
		t.Fatalf("%d teardowns ran, want %d", n, maxTeardowns+1)
	}
}

// TestTeardownsGivenUp: once given up (Service.Abort), wait returns while
// a teardown is stuck, and says which execution's it is.
func TestTeardownsGivenUp(t *testing.T) {
	var logged strings.Builder
	td := newTeardowns(slog.New(slog.NewTextHandler(&logged, nil)))
	release := make(chan struct{})
	defer close(release)
	var done atomic.Int64
	td.finish("stuck", slowEgress{release: release, done: &done})
	waited := make(chan struct{})
	go func() { td.wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("wait returned while a teardown runs")
	case <-time.After(100 * time.Millisecond):
	}
	td.giveUp()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return once given up")
	}
	if !strings.Contains(logged.String(), "stuck") {
		t.Errorf("the execution left is not named: %q", logged.String())
	}
}
