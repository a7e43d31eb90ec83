package executions

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/store"
)

// startFleet starts n engines, each with its own connections and store,
// on one in-process NATS server without a listener: a fleet of n nodes
// on one server.
func startFleet(t *testing.T, cfg nodeConfig, n int) []*env {
	t.Helper()
	srv, err := server.NewServer(&server.Options{ServerName: "fleet", DontListen: true, JetStream: true,
		StoreDir: t.TempDir(), NoSigs: true, MaxPayload: store.EmbeddedMaxPayload})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server did not start")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	cfg.exec.Fleet = true
	ctx := context.Background()
	var nodes []*env
	for i := range n {
		conn := func() *nats.Conn {
			nc, err := nats.Connect("", nats.InProcessServer(srv), nats.Name(fmt.Sprintf("node%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			return nc
		}
		st, err := store.Open(ctx, conn(), store.Config{AckWait: 10 * time.Second}, store.FollowersOn(conn()))
		if err != nil {
			t.Fatal(err)
		}
		runner := &runtest.Runner{}
		cfg.exec.Node = fmt.Sprintf("node%d", i) // a fleet's nodes have names of their own
		nd := newNode(t, cfg, Deps{Store: st, Runner: runner, Interpreters: runtest.Interpreters{}, Driver: runtest.PlainDriver{}})
		nodes = append(nodes, &env{st: st, eng: nd.x, node: nd, runner: runner})
	}
	return nodes
}

// DOS-01 on a fleet of two: key a floods node 1 with 50 jobs that each run
// 2 s (to their time limit); a second later key b's job, submitted to
// node 2, completes within 2 s + 2 s, because every freed slot of the
// fleet goes to the key running the fewest. a's jobs run on both nodes,
// not only where they were submitted.
func TestFleetFloodDoesNotDelayOtherKey(t *testing.T) {
	nodes := startFleet(t, nodeConfig{slots: admission.Config{Concurrency: 2, QueueSize: 100}}, 2)
	ctx := context.Background()
	const jobTime = 2 * time.Second
	for i := range 50 {
		if _, err := nodes[0].eng.Submit(ctx, scriptBy("sleep:"+jobTime.String(), "a")); err != nil {
			t.Fatalf("a's flood job %d: %v", i, err)
		}
	}
	time.Sleep(time.Second)
	start := time.Now()
	id, err := nodes[1].eng.Submit(ctx, scriptBy("print:1\n", "b"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		x, err := getExec(ctx, nodes[1].eng, id)
		if err != nil {
			t.Fatal(err)
		}
		if x.Status == run.StatusCompleted {
			break
		}
		if x.Status.Final() {
			t.Fatalf("b's job ended %s", x.Status)
		}
		if waited := time.Since(start); waited > jobTime+2*time.Second {
			t.Fatalf("b's job is %s %s after it was queued behind a's flood of 50, want done within %s",
				x.Status, waited, jobTime+2*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("b's job behind a's flood of 50 on a fleet of two: done in %s", time.Since(start))
	for i, n := range nodes {
		if runs := n.runner.Runs.Load(); runs < 2 {
			t.Errorf("node %d ran %d jobs of the flood, want its share (both nodes have free slots)", i+1, runs)
		}
	}
}

// A job submitted to a node with no free slot runs at once on the node
// that has one; with both full it waits for the first slot that frees
// anywhere. Neither node takes a job it cannot start, so nothing is
// stuck behind a busy node.
func TestFleetJobGoesToFreeSlot(t *testing.T) {
	nodes := startFleet(t, nodeConfig{slots: admission.Config{Concurrency: 1, QueueSize: 10}}, 2)
	ctx := context.Background()
	block, err := nodes[0].eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the blocker to run", func() bool { return statusOf(t, nodes[0].eng, block) == run.StatusRunning })
	blocked := nodes[0]
	if nodes[1].runner.Runs.Load() == 1 {
		blocked = nodes[1]
	}
	free := nodes[0]
	if blocked == nodes[0] {
		free = nodes[1]
	}
	// Submitted to the busy node, run by the free one.
	start := time.Now()
	id, err := blocked.eng.Submit(ctx, runtest.Script("print:x"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the job on the free node", func() bool { return statusOf(t, blocked.eng, id) == run.StatusCompleted })
	if took := time.Since(start); took > time.Second {
		t.Errorf("a job took %s to start on the idle node, want well under a second", took)
	}
	if free.runner.Runs.Load() != 1 || blocked.runner.Runs.Load() != 1 {
		t.Errorf("runs: busy node %d, free node %d; want 1 each", blocked.runner.Runs.Load(), free.runner.Runs.Load())
	}
	// Both full: the next job waits in the queue, then runs where a slot
	// frees first.
	block2, err := free.eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the second blocker to run", func() bool { return statusOf(t, free.eng, block2) == run.StatusRunning })
	waiting, err := free.eng.Submit(ctx, runtest.Script("print:y"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if st := statusOf(t, free.eng, waiting); st != run.StatusPending {
		t.Fatalf("job with every slot busy is %s, want pending", st)
	}
	if st, err := free.eng.Kill(ctx, block); err != nil || st != run.StatusKilled {
		t.Fatalf("Kill(first blocker) = %s, %v", st, err)
	}
	runtest.WaitFor(t, "the waiting job", func() bool { return statusOf(t, free.eng, waiting) == run.StatusCompleted })
	if blocked.runner.Runs.Load() != 2 {
		t.Errorf("the waiting job did not run on the node whose slot freed (its runs: %d)", blocked.runner.Runs.Load())
	}
	if st, err := blocked.eng.Kill(ctx, block2); err != nil || st != run.StatusKilled {
		t.Fatalf("Kill(second blocker) via the other node = %s, %v", st, err)
	}
}

// A node that shuts down holds no queued jobs: they run on the other node
// as soon as it has a slot, not after the queue's ack wait (10 s here).
func TestFleetCloseLeavesQueuedJobsToOthers(t *testing.T) {
	nodes := startFleet(t, nodeConfig{slots: admission.Config{Concurrency: 1, QueueSize: 10}}, 2)
	ctx := context.Background()
	var blockers []string
	for i := range 2 {
		id, err := nodes[i].eng.Submit(ctx, runtest.Script("block"))
		if err != nil {
			t.Fatal(err)
		}
		runtest.WaitFor(t, "a blocker to run", func() bool { return statusOf(t, nodes[i].eng, id) == run.StatusRunning })
		blockers = append(blockers, id)
	}
	var queued []string
	for range 3 {
		id, err := nodes[0].eng.Submit(ctx, runtest.Script("print:x"))
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, id)
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_ = nodes[0].node.stop(cctx) // its blocker is stopped: node_lost
	for _, id := range blockers {
		if st, err := nodes[1].eng.Kill(ctx, id); err != nil || !st.Final() {
			t.Fatalf("Kill(%s) = %s, %v", id, st, err)
		}
	}
	start := time.Now()
	for _, id := range queued {
		runtest.WaitFor(t, "a queued job on the remaining node", func() bool { return statusOf(t, nodes[1].eng, id) == run.StatusCompleted })
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the remaining node ran the queued jobs in %s, want well under the ack wait (10 s)", took)
	}
	if runs := nodes[0].runner.Runs.Load(); runs != 1 {
		t.Errorf("the closed node ran %d executions, want only its blocker", runs)
	}
}

// In a fleet a sync request the accepting node has no slot for goes
// through the queue: the node with a free slot runs it and the caller
// gets the same answer as from a local run. With a free slot here it
// runs here. A caller that goes away while it waits stops it.
func TestFleetSyncRunsWhereASlotIsFree(t *testing.T) {
	nodes := startFleet(t, nodeConfig{slots: admission.Config{Concurrency: 1, QueueSize: 10}}, 2)
	ctx := context.Background()
	local, err := nodes[0].eng.RunSync(ctx, runtest.Script("print:here"))
	if err != nil || local.Status != run.StatusCompleted || local.Stdout != "here" {
		t.Fatalf("sync on an idle node: %+v, %v", local, err)
	}
	if nodes[0].runner.Runs.Load() != 1 {
		t.Fatalf("a sync request with a free slot here did not run here (runs: %d and %d)",
			nodes[0].runner.Runs.Load(), nodes[1].runner.Runs.Load())
	}
	blockCtx, stopBlock := context.WithCancel(ctx)
	blocked := make(chan *run.Execution, 1)
	go func() {
		x, _ := nodes[0].eng.RunSync(blockCtx, runtest.Script("block"))
		blocked <- x
	}()
	runtest.WaitFor(t, "node 1's slot to be taken", func() bool { return nodes[0].node.adm.Stats().Running == 1 })

	start := time.Now()
	moved, err := nodes[0].eng.RunSync(ctx, runtest.Script("print:there"))
	if err != nil || moved.Status != run.StatusCompleted || moved.Stdout != "there" {
		t.Fatalf("sync on a busy node of a fleet with a free one: %+v, %v", moved, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the sync request took %s through the queue to the free node, want well under a second", took)
	}
	if nodes[1].runner.Runs.Load() != 1 {
		t.Errorf("the free node ran %d executions, want the one the busy node could not start", nodes[1].runner.Runs.Load())
	}
	stored, err := getExec(ctx, nodes[1].eng, moved.ID)
	if err != nil || stored.Stdout != moved.Stdout || stored.Status != moved.Status || stored.ExitCode != moved.ExitCode {
		t.Errorf("the answer %+v differs from the stored execution %+v (%v)", moved, stored, err)
	}

	// Both busy: a caller that gives up while its request waits in the
	// queue ends it killed, and it never runs.
	block2, err := nodes[1].eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "node 2's slot to be taken", func() bool { return statusOf(t, nodes[1].eng, block2) == run.StatusRunning })
	gone, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	x, err := nodes[0].eng.RunSync(gone, runtest.Script("print:never"))
	if err != nil || x.Status != run.StatusKilled || x.StartedAt != nil {
		t.Fatalf("sync request whose caller left while it was queued: %+v, %v; want killed before it started", x, err)
	}
	stopBlock()
	if x := <-blocked; x == nil || x.Status != run.StatusKilled {
		t.Errorf("node 1's blocker ended %+v, want killed", x)
	}
	if _, err := nodes[1].eng.Kill(ctx, block2); err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the queue to drain", func() bool {
		d, err := nodes[0].st.QueueDepth(ctx)
		return err == nil && d == 0
	})
	if runs := nodes[0].runner.Runs.Load() + nodes[1].runner.Runs.Load(); runs != 4 {
		t.Errorf("%d executions ran, want 4 (the one whose caller left must not run)", runs)
	}
}
