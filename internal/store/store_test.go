package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// open starts an embedded server in dir and opens the store on it; both
// are closed when the test ends unless the caller closes them first.
func open(t *testing.T, dir string, cfg Config) (*NATS, *Embedded) {
	t.Helper()
	ctx := context.Background()
	emb, err := StartEmbedded(ctx, dir, nil)
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	s, err := Open(ctx, emb.Conn(), cfg, FollowersOn(emb.FollowConn()))
	if err != nil {
		_ = emb.Close()
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if !emb.Conn().IsClosed() {
			if err := emb.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
	return s, emb
}

func TestRecordTransitionsAreCompareAndSet(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()

	rev, err := s.Create(ctx, "exe_1", []byte(`running`), Meta{Status: "running"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := s.Create(ctx, "exe_1", []byte(`again`), Meta{Status: "running"}); !errors.Is(err, ErrExists) {
		t.Fatalf("second Create: got %v, want ErrExists", err)
	}
	// Two writers read the same revision; the kill lands first.
	if _, err := s.Update(ctx, "exe_1", []byte(`killed`), rev, Meta{Status: "killed", Final: true}); err != nil {
		t.Fatalf("Update(killed): %v", err)
	}
	if _, err := s.Update(ctx, "exe_1", []byte(`completed`), rev, Meta{Status: "completed", Final: true}); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale Update(completed): got %v, want ErrConflict", err)
	}
	got, err := s.Get(ctx, "exe_1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if string(got.Value) != "killed" {
		t.Errorf("value = %q, want killed", got.Value)
	}
	if _, err := s.Get(ctx, "exe_missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(missing): got %v, want ErrNotFound", err)
	}
}

func TestOpenAppliesRetention(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantTTL time.Duration
	}{
		{"default", Config{}, 24 * time.Hour},
		{"configured", Config{TTL: 90 * time.Minute}, 90 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := open(t, t.TempDir(), tt.cfg)
			ctx := context.Background()
			st, err := s.records.Status(ctx)
			if err != nil {
				t.Fatalf("records status: %v", err)
			}
			if st.TTL() != tt.wantTTL {
				t.Errorf("records TTL = %s, want %s", st.TTL(), tt.wantTTL)
			}
			info, err := s.events.Info(ctx)
			if err != nil {
				t.Fatalf("events info: %v", err)
			}
			if info.Config.MaxAge != tt.wantTTL {
				t.Errorf("events max age = %s, want %s", info.Config.MaxAge, tt.wantTTL)
			}
		})
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	emb, err := StartEmbedded(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"tiny ttl", Config{TTL: time.Millisecond}},
		{"record limit below 64 KiB", Config{MaxRecordBytes: 1 << 10}},
		{"replicas", Config{Replicas: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Open(context.Background(), emb.Conn(), tt.cfg); err == nil {
				t.Error("Open accepted the config")
			}
		})
	}
}

func TestEventsReplayThenLive(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for _, d := range []string{"a", "b", "c"} {
		if err := s.PublishEvent(ctx, "exe_1", []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	// Another execution's events must not show up.
	if err := s.PublishEvent(ctx, "exe_2", []byte("other")); err != nil {
		t.Fatal(err)
	}
	ch, err := s.FollowEvents(ctx, "exe_1")
	if err != nil {
		t.Fatal(err)
	}
	expect := func(seq uint64, data string) EventMsg {
		t.Helper()
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed, want event %d", seq)
			}
			if ev.Seq != seq || string(ev.Data) != data {
				t.Fatalf("got event %d %q, want %d %q", ev.Seq, ev.Data, seq, data)
			}
			return ev
		case <-ctx.Done():
			t.Fatalf("timed out waiting for event %d", seq)
		}
		return EventMsg{}
	}
	expect(1, "a")
	expect(2, "b")
	expect(3, "c")
	if err := s.PublishEvent(ctx, "exe_1", []byte("live")); err != nil {
		t.Fatal(err)
	}
	expect(4, "live")
	if err := s.PublishEvents(ctx, "exe_1", [][]byte{[]byte("batch 1"), []byte("batch 2")}); err != nil {
		t.Fatal(err)
	}
	expect(5, "batch 1")
	ev := expect(6, "batch 2")
	last, err := s.LastEvent(ctx, "exe_1")
	if err != nil {
		t.Fatal(err)
	}
	if last != ev.StreamSeq {
		t.Errorf("LastEvent = %d, want the stream seq %d of the live event", last, ev.StreamSeq)
	}
	if none, err := s.LastEvent(ctx, "exe_none"); err != nil || none != 0 {
		t.Errorf("LastEvent(no events) = %d, %v; want 0, nil", none, err)
	}
	cancel()
	for range ch { // the channel must close once ctx ends
	}
}

func TestAuditIsAppended(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	for _, rec := range []string{`{"n":1}`, `{"n":2}`} {
		if err := s.AppendAudit(ctx, []byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.js.Stream(ctx, AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("audit stream holds %d records, want 2", info.State.Msgs)
	}
	last, err := st.GetLastMsgForSubject(ctx, AuditSubject)
	if err != nil {
		t.Fatal(err)
	}
	if string(last.Data) != `{"n":2}` {
		t.Errorf("last audit record = %s", last.Data)
	}
}

func TestQueueDeliversOnceAndDrains(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	for _, id := range []string{"exe_q", "exe_r"} {
		if err := s.Enqueue(ctx, "k", id); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := s.QueuedIDs(ctx)
	if err != nil || fmt.Sprint(ids) != "[exe_q exe_r]" {
		t.Fatalf("QueuedIDs = %v, %v; want [exe_q exe_r]", ids, err)
	}
	if d, err := s.QueueDepth(ctx); err != nil || d != 2 {
		t.Fatalf("QueueDepth = %d, %v; want 2", d, err)
	}
	job, err := s.TakeJob(ctx, "k")
	if err != nil || job == nil {
		t.Fatalf("TakeJob = %v, %v", job, err)
	}
	if job.ID() != "exe_q" {
		t.Errorf("job id %q, want exe_q", job.ID())
	}
	if err := job.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.QueuedIDs(ctx); err != nil || fmt.Sprint(ids) != "[exe_r]" {
		t.Errorf("QueuedIDs after ack = %v, %v; want [exe_r]", ids, err)
	}
	// A job handed back is available again at once.
	job, err = s.TakeJob(ctx, "k")
	if err != nil || job == nil || job.ID() != "exe_r" {
		t.Fatalf("second TakeJob = %v, %v; want exe_r", job, err)
	}
	if err := job.Nak(); err != nil {
		t.Fatal(err)
	}
	job = takeSoon(t, s, "k")
	if job == nil || job.ID() != "exe_r" {
		t.Fatalf("TakeJob after Nak = %v; want exe_r again", job)
	}
	if err := job.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := s.QueueDepth(ctx); err != nil || d != 0 {
		t.Errorf("QueueDepth after acks = %d, %v; want 0", d, err)
	}
	start := time.Now()
	job, err = s.TakeJob(ctx, "k")
	if err != nil || job != nil {
		t.Errorf("TakeJob on an empty queue = %v, %v; want nil, nil", job, err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("TakeJob waited %s for an empty queue", waited)
	}
}

// takeSoon takes key's next job, retrying for a second: a job handed back
// is available again after a round trip to the server.
func takeSoon(t *testing.T, s *NATS, key string) Job {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		job, err := s.TakeJob(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if job != nil || time.Now().After(deadline) {
			return job
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Each key has a queue of its own: a worker taking the keys in turn gets
// their jobs alternately, however many one key queued first.
func TestQueueKeysTakenAlternately(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	for i := range 5 {
		if err := s.Enqueue(ctx, "flood key/with spaces.*", fmt.Sprintf("exe_a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := s.Enqueue(ctx, "b", fmt.Sprintf("exe_b%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for range 3 {
		for _, key := range []string{"flood key/with spaces.*", "b"} {
			job, err := s.TakeJob(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if job == nil {
				got = append(got, "-")
				continue
			}
			got = append(got, job.ID())
			if err := job.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := "[exe_a0 exe_b0 exe_a1 exe_b1 exe_a2 -]"; fmt.Sprint(got) != want {
		t.Errorf("jobs taken in turn = %v, want %s", got, want)
	}
}

func TestControlReachesTheOwner(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.SendControl(ctx, "exe_c", []byte("kill")); !errors.Is(err, ErrNoOwner) {
		t.Fatalf("SendControl without owner: got %v, want ErrNoOwner", err)
	}
	stop, err := s.HandleControl("exe_c", func(data []byte) []byte { return append([]byte("ack "), data...) })
	if err != nil {
		t.Fatal(err)
	}
	reply, err := s.SendControl(ctx, "exe_c", []byte("kill"))
	if err != nil || string(reply) != "ack kill" {
		t.Fatalf("SendControl = %q, %v; want \"ack kill\"", reply, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendControl(ctx, "exe_c", []byte("kill")); !errors.Is(err, ErrNoOwner) {
		t.Errorf("SendControl after stop: got %v, want ErrNoOwner", err)
	}
}

func TestRequestsHoldLargePayloads(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), (12<<20)/16) // above max_payload
	if err := s.PutRequest(ctx, "exe_r", big); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRequest(ctx, "exe_r")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Errorf("request came back with %d bytes, want %d", len(got), len(big))
	}
	if err := s.DeleteRequest(ctx, "exe_r"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRequest(ctx, "exe_r"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRequest after delete: got %v, want ErrNotFound", err)
	}
}

func TestRecordsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, emb := open(t, dir, Config{})
	if _, err := s.Create(ctx, "exe_keep", []byte("kept"), Meta{Status: "pending"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(ctx, "k", "exe_keep"); err != nil {
		t.Fatal(err)
	}
	if err := emb.Close(); err != nil {
		t.Fatal(err)
	}

	s, _ = open(t, dir, Config{})
	got, err := s.Get(ctx, "exe_keep")
	if err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	if string(got.Value) != "kept" {
		t.Errorf("value after restart = %q", got.Value)
	}
	if d, err := s.QueueDepth(ctx); err != nil || d != 1 {
		t.Errorf("QueueDepth after restart = %d, %v; want 1", d, err)
	}
}

// A job taken but never acked (its worker died) is available again at
// once after RequeueHeld, not only after the ack wait; jobs not taken stay
// as they are.
func TestRequeueHeldJobs(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	for _, id := range []string{"exe_held", "exe_waiting"} {
		if err := s.Enqueue(ctx, "k", id); err != nil {
			t.Fatal(err)
		}
	}
	if job, err := s.TakeJob(ctx, "k"); err != nil || job == nil || job.ID() != "exe_held" {
		t.Fatalf("TakeJob = %v, %v; want exe_held", job, err)
	}
	n, err := s.RequeueHeld(ctx)
	if err != nil || n != 1 {
		t.Fatalf("RequeueHeld = %d, %v; want 1", n, err)
	}
	if ids, err := s.QueuedIDs(ctx); err != nil || fmt.Sprint(ids) != "[exe_held exe_waiting]" {
		t.Fatalf("QueuedIDs after RequeueHeld = %v, %v; want [exe_held exe_waiting]", ids, err)
	}
	var got []string
	for range 2 {
		job, err := s.TakeJob(ctx, "k")
		if err != nil || job == nil {
			t.Fatalf("TakeJob after RequeueHeld = %v, %v; got %v so far", job, err, got)
		}
		got = append(got, job.ID())
		if err := job.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[exe_held exe_waiting]" {
		t.Errorf("jobs after RequeueHeld = %v, want [exe_held exe_waiting]", got)
	}
	if d, err := s.QueueDepth(ctx); err != nil || d != 0 {
		t.Errorf("QueueDepth after acking both = %d, %v; want 0", d, err)
	}
}

// A key's consumer that went away (idle past its inactive threshold, or
// removed by another node) is created again by the next fetch: the key's
// jobs are not stranded.
func TestTakeJobAfterConsumerGone(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	if job, err := s.TakeJob(ctx, "k"); err != nil || job != nil {
		t.Fatalf("TakeJob on an empty queue = %v, %v", job, err)
	}
	if err := s.queue.DeleteConsumer(ctx, queueConsumerPrefix+QueueToken("k")); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(ctx, "k", "exe_after"); err != nil {
		t.Fatal(err)
	}
	job, err := s.TakeJob(ctx, "k")
	if err != nil || job == nil || job.ID() != "exe_after" {
		t.Fatalf("TakeJob after the consumer went = %v, %v; want exe_after", job, err)
	}
}
