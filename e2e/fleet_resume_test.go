package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

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
	needRoot(t)
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
