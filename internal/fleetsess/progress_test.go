package fleetsess

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/store"
)

// installEngine creates sessions after reporting installer lines; it
// holds at most max of them. Only creation is used.
type installEngine struct {
	Engine // nil: any other call panics, so the test sees it
	max    int
	lines  []string

	mu   sync.Mutex
	live int
}

func (f *installEngine) CreateSession(_ context.Context, req engine.SessionRequest) (engine.Session, error) {
	for _, l := range f.lines {
		req.Progress(l)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live++
	return engine.Session{ID: "ses_placed", Caller: req.Caller, CreatedAt: time.Now()}, nil
}

func (f *installEngine) LiveSessions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live
}

func (f *installEngine) SessionCap() int { return f.max }

// SweepHibernations: the sweep at Start finds no snapshots here.
func (f *installEngine) SweepHibernations(context.Context, func(engine.SnapshotInfo) string) (int, error) {
	return 0, nil
}

// TestPlacedCreateStreamsInstallLines: a create forwarded to another node
// delivers the installer's lines to the caller's Progress, in order, before
// it returns.
func TestPlacedCreateStreamsInstallLines(t *testing.T) {
	srv := fleetServer(t)
	lines := []string{"Resolved 3 packages", "Downloading polars", "Installed 3 packages"}
	start := func(name string, eng Engine) *Router {
		nc, err := nats.Connect("", nats.InProcessServer(srv))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		reg, err := store.Open(context.Background(), nc, store.Config{MaxRecordBytes: testMaxPayload / 2})
		if err != nil {
			t.Fatal(err)
		}
		r, err := New(Config{Node: name, Conn: nc, Registry: reg, Blobs: reg})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(context.Background(), eng); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	full := start("a", &installEngine{max: 0})
	other := &installEngine{max: 1, lines: lines}
	start("b", other)

	var mu sync.Mutex
	var got []string
	s, err := full.CreateSession(context.Background(), engine.SessionRequest{Caller: "alice", Progress: func(l string) {
		mu.Lock()
		got = append(got, l)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != "ses_placed" || other.LiveSessions() != 1 {
		t.Fatalf("the create did not reach b: %+v", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, lines) {
		t.Fatalf("install lines at a: %q, want %q", got, lines)
	}
}

func (f *installEngine) FenceSessions() []string { return nil }

func (f *installEngine) NodeAlive(string) bool { return false }
