package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
)

// nodeNamesOf lists the names GET /api/v1/nodes of s returns.
func nodeNamesOf(s *server) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := client.New(s.url).ListNodes(ctx)
	if err != nil {
		return nil
	}
	var names []string
	for _, n := range list.Nodes {
		names = append(names, n.Name)
	}
	return names
}

// TestFleetNodeLoss kills a pyexec node with SIGKILL while it runs an
// execution and the queue holds more: within 10s (--node-lost-after) the
// execution it ran is failed/node_lost, the other nodes drop it from GET
// /api/v1/nodes, their own executions are untouched, and the queued work
// completes on them.
func TestFleetNodeLoss(t *testing.T) {
	needRoot(t)
	fleet := startFleet(t, startNATSCluster(t, 3), 3, "--max-concurrency", "1")
	a, b, c := fleet[0], fleet[1], fleet[2]
	ctx := context.Background()
	for _, s := range fleet {
		eventually(t, 10*time.Second, "every node to list the three", func() bool {
			return slices.Equal(nodeNamesOf(s), []string{"a", "b", "c"})
		})
	}

	// One long execution per node (each runs one at a time), then work
	// that waits in the queue.
	viaA := client.New(a.url)
	long := mustTar(t, map[string]string{"main.py": "import time\nprint('up', flush=True)\ntime.sleep(300)\n"})
	var longIDs []string
	for range 3 {
		id, err := viaA.ExecuteAsync(ctx, long, &client.Metadata{Config: &client.ExecutionConfig{TimeoutSeconds: 300}})
		if err != nil {
			t.Fatal(err)
		}
		longIDs = append(longIDs, id)
	}
	viaB := client.New(b.url)
	onNode := map[string]string{}
	eventually(t, time.Minute, "a long execution running on each node", func() bool {
		clear(onNode)
		for _, id := range longIDs {
			if r, err := viaB.GetExecution(ctx, id); err == nil && r.Status == client.StatusRunning {
				onNode[r.Node] = id
			}
		}
		return len(onNode) == 3
	})
	var queued []string
	for i := range 4 {
		id, err := submitScript(ctx, viaA, fmt.Sprintf("print('queued %d')", i))
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, id)
	}
	time.Sleep(time.Second) // the nodes' dispatchers take jobs in line

	a.crash()
	crashed := time.Now()
	var lost *client.ExecutionResult
	eventually(t, 15*time.Second, "a's execution to end", func() bool {
		r, err := viaB.GetExecution(ctx, onNode["a"])
		lost = r
		return err == nil && r.Status.Final()
	})
	took := time.Since(crashed)
	t.Logf("a's execution ended %s after the crash: %s (%s)", took.Round(time.Millisecond), lost.Reason, lost.Error)
	if lost.Status != client.StatusFailed || lost.Reason != client.ReasonNodeLost || lost.Node != "a" {
		t.Errorf("a's execution: status %s reason %q node %q, want failed/node_lost on a", lost.Status, lost.Reason, lost.Node)
	}
	if took > 11*time.Second {
		t.Errorf("a's execution ended %s after the crash, want within 10s (--node-lost-after) and a little", took)
	}
	for _, s := range []*server{b, c} {
		eventually(t, 2*time.Second, "a to leave the node list", func() bool {
			return slices.Equal(nodeNamesOf(s), []string{"b", "c"})
		})
	}
	for _, node := range []string{"b", "c"} {
		r, err := viaB.GetExecution(ctx, onNode[node])
		if err != nil || r.Status != client.StatusRunning {
			t.Errorf("%s's execution after a was lost: %v %+v, want still running", node, err, r)
		}
		if err := viaB.KillExecution(ctx, onNode[node]); err != nil {
			t.Fatal(err)
		}
	}

	final := waitFinal(t, []*server{b, c}, queued, 90*time.Second)
	for i, id := range queued {
		r := final[id]
		if r.Status != client.StatusCompleted || r.Stdout != fmt.Sprintf("queued %d\n", i) || (r.Node != "b" && r.Node != "c") {
			t.Errorf("queued execution %d: status %s stdout %q node %q error %q, want completed on b or c", i, r.Status, r.Stdout, r.Node, r.Error)
		}
	}
}
