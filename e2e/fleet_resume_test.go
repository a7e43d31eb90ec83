package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
)

// fleetSnapshotKey is the snapshot key every node of a test fleet shares,
// so that each verifies the others' snapshots.
var fleetSnapshotKey = strings.Repeat("5a", 32)

// TestFleetRollingRestartKeepsSessions restarts each node of a 3-node
// fleet in turn (SIGTERM, then a start on the same data directory) with 20
// live sessions: while a node is down, the other nodes take over the
// sessions it saved at its shutdown as their next calls come; the node,
// started again, leaves them there; at the end each of the 20 still has
// its variables.
func TestFleetRollingRestartKeepsSessions(t *testing.T) {
	fleetInParallel(t)
	fleet := startFleet(t, startNATSCluster(t, 3), 3, "--max-sessions-per-key", "20", "--snapshot-key", fleetSnapshotKey)
	ctx := context.Background()
	const n = 20
	ids := make([]string, n)
	for i := range ids {
		c := client.New(fleet[i%3].url)
		s, err := c.CreateSession(ctx, &client.SessionRequest{Requirements: "-"})
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		ids[i] = s.SessionID
		if _, err := c.ExecuteCell(ctx, s.SessionID, &client.CellRequest{Code: fmt.Sprintf("v = %d", i)}); err != nil {
			t.Fatalf("v = %d: %v", i, err)
		}
	}
	check := func(via *server, what string) (resumed int) {
		t.Helper()
		c := client.New(via.url)
		for i, id := range ids {
			res, err := c.ExecuteCell(ctx, id, &client.CellRequest{Code: "v"})
			if err != nil || res.Result == nil || *res.Result != fmt.Sprint(i) {
				t.Fatalf("session %d %s: %+v, %v\n%s", i, what, res, err, logsAbout(fleet, id))
			}
			if res.Resumed {
				resumed++
			}
		}
		return resumed
	}
	for i := range fleet {
		old := fleet[i]
		old.stop(t)
		// Every session answers through the next node while this one is
		// down: those this node saved are taken over.
		taken := check(fleet[(i+1)%3], "while node "+nodeName(i)+" is down")
		fleet[i] = startServerEnv(t, old.dataDir, old.env, old.args...)
		t.Logf("node %s down: %d sessions resumed on the other nodes", nodeName(i), taken)
		if taken == 0 {
			t.Errorf("no session saved by node %s was resumed elsewhere", nodeName(i))
		}
	}
	check(fleet[0], "after the rolling restart")
}

// TestFleetKillResumesFromCheckpoints kills a node of a 3-node fleet with
// SIGKILL while it holds sessions: one that was checkpointed then ran one
// more cell resumes on another node with its checkpointed variables, its
// first cell saying restored_from with one cell lost; one that never had a
// checkpoint (younger than --session-checkpoint-every at its cell) ends
// node_lost.
func TestFleetKillResumesFromCheckpoints(t *testing.T) {
	needRoot(t)
	const every = 5 * time.Second // well over what the cells below take after the checkpoint
	fleet := startFleet(t, startNATSCluster(t, 3), 3, "--snapshot-key", fleetSnapshotKey,
		"--session-checkpoint-every", fmt.Sprint(every.Seconds()))
	a, b := client.New(fleet[0].url), client.New(fleet[1].url)
	ctx := context.Background()
	create := func() string {
		s, err := a.CreateSession(ctx, &client.SessionRequest{Requirements: "-"})
		if err != nil {
			t.Fatal(err)
		}
		return s.SessionID
	}
	cell := func(c *client.Client, id, code string) *client.CellResult {
		t.Helper()
		res, err := c.ExecuteCell(ctx, id, &client.CellRequest{Code: code})
		if err != nil {
			t.Fatalf("%q in %s: %v", code, id, err)
		}
		return res
	}
	kept := []string{create(), create()}
	time.Sleep(every) // older than every: their next cell is checkpointed
	bare := create()
	cell(a, bare, "y = 1")
	for i, id := range kept {
		cell(a, id, fmt.Sprintf("x = %d", i))
	}
	// The checkpoints are saved in the background: give them a moment, then
	// one more cell each, whose count is recorded in the background too.
	time.Sleep(time.Second)
	for _, id := range kept {
		cell(a, id, "x = 'lost'")
	}
	time.Sleep(time.Second)
	fleet[0].crash()

	for i, id := range kept {
		// Until the fleet declares a lost (--node-lost-after), a session
		// with a checkpoint is not resumed elsewhere: 503, retry later.
		var res *client.CellResult
		for deadline := time.Now().Add(30 * time.Second); ; {
			var err error
			res, err = b.ExecuteCell(ctx, id, &client.CellRequest{Code: "x"})
			var apiErr *client.APIError
			if err == nil {
				break
			}
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
				t.Fatalf("session %d via b after a's kill: %v", i, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		if res.Result == nil || *res.Result != fmt.Sprint(i) || res.RestoredFrom == nil || res.RestoredFrom.CellsLost != 1 ||
			res.RestoredFrom.CheckpointExecutionCount != 1 || !res.Resumed {
			t.Errorf("session %d via b after a's kill: result %v, resumed %v, restored %+v\n%s", i, res.Result, res.Resumed,
				res.RestoredFrom, logsAbout(fleet, id))
		}
		if res := cell(b, id, "x"); res.RestoredFrom != nil || *res.Result != fmt.Sprint(i) {
			t.Errorf("session %d, the next cell: restored %+v, result %v", i, res.RestoredFrom, res.Result)
		}
	}
	_, err := b.ExecuteCell(ctx, bare, &client.CellRequest{Code: "y"})
	assertNodeLost(t, err, "the session without a checkpoint, via b")
}
