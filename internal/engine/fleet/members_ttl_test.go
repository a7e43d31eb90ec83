package fleet_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/fleet"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/store"
)

// TestNodeSilentLongerThanEntryTTLIsDeclaredLost runs a node with a
// --node-lost-after longer than the heartbeat bucket's TTL (the flag
// allows up to 1h). A node that dies writes nothing more, so its entry
// would expire before the survivors declare it lost; they must still
// declare it and settle what it ran.
func TestNodeSilentLongerThanEntryTTLIsDeclaredLost(t *testing.T) {
	if testing.Short() {
		t.Skip("waits longer than the heartbeat bucket's TTL")
	}
	url := startNATSServers(t, 1)[0]
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx := context.Background()
	st, err := store.Open(ctx, nc, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lostAfter := store.MemberTTL + 3*time.Second
	eng, err := engine.New(engine.Config{Node: "b", NodeLostAfter: lostAfter}, engine.Deps{Store: st, Runner: &runtest.Runner{},
		Interpreters: runtest.Interpreters{}, Driver: runtest.PlainDriver{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		eng.Close(cctx)
	})

	// Node a's last heartbeat, and the execution it was running when it
	// died.
	beat, err := json.Marshal(fleet.NodeInfo{Name: "a", Instance: "dead", StartedAt: run.Now(), HeartbeatAt: run.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateMember(ctx, "a", beat); err != nil {
		t.Fatal(err)
	}
	id := runningRecord(t, st, "a")
	runtest.WaitFor(t, "b to see a", func() bool { return sameNames(eng.Nodes(), "a", "b") })

	deadline := time.Now().Add(lostAfter + 5*time.Second)
	for statusOf(t, eng, id) == engine.StatusRunning {
		if time.Now().After(deadline) {
			t.Fatalf("a's execution is still running %s after a's last heartbeat (node-lost-after %s): a was never declared lost",
				lostAfter+5*time.Second, lostAfter)
		}
		time.Sleep(100 * time.Millisecond)
	}
	x, err := eng.Get(ctx, tester, id)
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != engine.StatusFailed || x.Reason != engine.ReasonNodeLost {
		t.Errorf("a's execution: %s/%q, want failed/node_lost", x.Status, x.Reason)
	}
}
