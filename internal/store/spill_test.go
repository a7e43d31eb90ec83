package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// openStock opens a store on a JetStream server with NATS's default
// max_payload (1 MB), as operators run shared clusters.
func openStock(t *testing.T) *NATS {
	t.Helper()
	srv, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if nc.MaxPayload() != 1<<20 {
		t.Fatalf("the stock server takes %d-byte messages, want NATS's default 1 MiB", nc.MaxPayload())
	}
	s, err := Open(context.Background(), nc, Config{})
	if err != nil {
		t.Fatalf("Open on a server with the default max_payload: %v", err)
	}
	return s
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// spilledObjects counts the objects holding spilled values.
func spilledObjects(t *testing.T, s *NATS) int {
	t.Helper()
	infos, err := s.requests.List(context.Background())
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatal(err)
	}
	return len(infos)
}

// TestRecordsAboveMaxPayloadSpill: records up to the record limit work on
// a server whose messages are limited to 1 MiB, through every operation,
// and deleting one removes its spilled copy.
func TestRecordsAboveMaxPayloadSpill(t *testing.T) {
	s := openStock(t)
	ctx := context.Background()
	small, big, bigger := []byte(`{"status":"pending"}`), randomBytes(3<<20), randomBytes(5<<20)
	rev, err := s.Create(ctx, "exe_1", big, Meta{Status: "running"})
	if err != nil {
		t.Fatalf("creating a 3 MiB record: %v", err)
	}
	if e, err := s.Get(ctx, "exe_1"); err != nil || !bytes.Equal(e.Value, big) {
		t.Fatalf("reading the 3 MiB record: %v (%d bytes)", err, len(e.Value))
	}
	// A stale revision is still refused, and leaves no spilled copy.
	before := spilledObjects(t, s)
	if _, err := s.Update(ctx, "exe_1", bigger, rev+1, Meta{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("update at a wrong revision: %v, want ErrConflict", err)
	}
	if n := spilledObjects(t, s); n != before {
		t.Errorf("a refused update left %d spilled objects, want %d", n, before)
	}
	if _, err = s.Update(ctx, "exe_1", bigger, rev, Meta{Status: "completed", Final: true}); err != nil {
		t.Fatalf("updating to 5 MiB: %v", err)
	}
	page, _, err := s.List(ctx, ListOptions{Limit: 10})
	if err != nil || len(page) != 1 || !bytes.Equal(page[0].Value, bigger) {
		t.Fatalf("listing the 5 MiB record: %v (%d entries)", err, len(page))
	}
	if _, err := s.Create(ctx, "exe_2", small, Meta{}); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Get(ctx, "exe_2"); err != nil || !bytes.Equal(e.Value, small) {
		t.Fatalf("a small record: %v %q", err, e.Value)
	}
	// A value that looks like a reference is stored as the value it is.
	tricky := append(bytes.Clone(spillMarker), `{"name":"exe_2","size":20}`...)
	if _, err := s.Create(ctx, "exe_3", tricky, Meta{}); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Get(ctx, "exe_3"); err != nil || !bytes.Equal(e.Value, tricky) {
		t.Fatalf("a value starting with the marker: %v %q", err, e.Value)
	}
	if _, err := s.Create(ctx, "exe_4", randomBytes(9<<20), Meta{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a record above the 8 MiB limit: %v, want ErrTooLarge", err)
	}
	for _, k := range []string{"exe_1", "exe_2", "exe_3"} {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	// The first update's copy stays until the TTL; the others are gone.
	if n := spilledObjects(t, s); n != 1 {
		t.Errorf("%d spilled objects after deleting every record, want 1 (the replaced 3 MiB value)", n)
	}
}

// TestEventsAboveMaxPayloadSpill: events larger than a message are
// replayed whole and in order, live and read back, and purging an
// execution's events removes their spilled data.
func TestEventsAboveMaxPayloadSpill(t *testing.T) {
	s := openStock(t)
	ctx := context.Background()
	want := [][]byte{[]byte("first"), randomBytes(2 << 20), []byte("third"), randomBytes(1 << 20), []byte("last")}
	if err := s.PublishEvent(ctx, "exe_e", want[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.PublishEvent(ctx, "exe_e", want[1]); err != nil {
		t.Fatalf("publishing a 2 MiB event: %v", err)
	}
	if err := s.PublishEvents(ctx, "exe_e", want[2:]); err != nil {
		t.Fatalf("publishing a batch with a 1 MiB event: %v", err)
	}
	check := func(how string, got [][]byte) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d events, want %d", how, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("%s: event %d has %d bytes, not the %d published", how, i+1, len(got[i]), len(want[i]))
			}
		}
	}
	var read [][]byte
	if err := s.ReadEvents(ctx, "exe_e", func(m EventMsg) error { read = append(read, m.Data); return nil }); err != nil {
		t.Fatal(err)
	}
	check("ReadEvents", read)
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ch, err := s.FollowEvents(fctx, "exe_e")
	if err != nil {
		t.Fatal(err)
	}
	var followed [][]byte
	for m := range ch {
		followed = append(followed, m.Data)
		if m.Seq != uint64(len(followed)) {
			t.Errorf("event %d numbered %d", len(followed), m.Seq)
		}
		if len(followed) == len(want) {
			cancel()
		}
	}
	check("FollowEvents", followed)
	if last, err := s.LastEvent(ctx, "exe_e"); err != nil || last == 0 {
		t.Fatalf("LastEvent: %d %v", last, err)
	}
	if n := spilledObjects(t, s); n != 2 {
		t.Errorf("%d spilled objects, want 2", n)
	}
	if err := s.PurgeEvents(ctx, "exe_e"); err != nil {
		t.Fatal(err)
	}
	if n := spilledObjects(t, s); n != 0 {
		t.Errorf("%d spilled objects after purging the events, want 0", n)
	}
	if last, err := s.LastEvent(ctx, "exe_e"); err != nil || last != 0 {
		t.Errorf("LastEvent after the purge: %d %v", last, err)
	}
}
