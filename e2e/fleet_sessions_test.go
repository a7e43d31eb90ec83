package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
)

// TestFleetSessions drives one session through every node of a 3-node
// fleet, then kills its node with SIGKILL: the next request, through a
// survivor, answers 410 with node_lost within seconds instead of hanging,
// and the node's restart keeps that answer.
func TestFleetSessions(t *testing.T) {
	needRoot(t)
	fleet := startFleet(t, startNATSCluster(t, 3), 3)
	a, b, c := client.New(fleet[0].url), client.New(fleet[1].url), client.New(fleet[2].url)
	ctx := context.Background()

	s, err := a.CreateSession(ctx, &client.SessionRequest{Requirements: "-"})
	if err != nil {
		t.Fatalf("create via a: %v", err)
	}
	if _, err := b.ExecuteCell(ctx, s.SessionID, &client.CellRequest{Code: "x = 1"}); err != nil {
		t.Fatalf("x = 1 via b: %v", err)
	}
	res, err := c.ExecuteCell(ctx, s.SessionID, &client.CellRequest{Code: "print(x)"})
	if err != nil || res.Stdout != "1\n" || res.ExecutionCount != 2 {
		t.Fatalf("print(x) via c: %+v, %v; want stdout 1 as cell 2", res, err)
	}
	if err := c.UploadSessionFile(ctx, s.SessionID, "data.csv", []byte("a,b\n1,2\n")); err != nil {
		t.Fatalf("upload via c: %v", err)
	}
	if got, err := b.DownloadSessionFile(ctx, s.SessionID, "data.csv"); err != nil || string(got) != "a,b\n1,2\n" {
		t.Fatalf("download via b: %q, %v", got, err)
	}
	list, err := c.ListSessions(ctx)
	if err != nil || len(list) != 1 || list[0].SessionID != s.SessionID {
		t.Fatalf("listing via c: %+v, %v", list, err)
	}

	fleet[0].crash() // the session was created on a, which had room
	start := time.Now()
	_, err = b.ExecuteCell(ctx, s.SessionID, &client.CellRequest{Code: "print(x)"})
	took := time.Since(start)
	assertNodeLost(t, err, "after the owner's kill -9, via b")
	if took > 5*time.Second {
		t.Errorf("the lost session's error took %s", took)
	}
	_, err = c.GetSession(ctx, s.SessionID)
	assertNodeLost(t, err, "again, via c")
	if list, err := c.ListSessions(ctx); err != nil || len(list) != 0 {
		t.Errorf("the lost session is still listed: %+v, %v", list, err)
	}

	// a comes back under the same name (and sweeps the jails it left);
	// the session stays ended with its reason.
	fleet[0] = startServerEnv(t, fleet[0].dataDir, fleet[0].env, fleet[0].args...)
	_, err = client.New(fleet[0].url).GetSession(ctx, s.SessionID)
	assertNodeLost(t, err, "via a restarted")
}

func assertNodeLost(t *testing.T, err error, what string) {
	t.Helper()
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusGone ||
		!strings.Contains(apiErr.Message, "node_lost: the node running this session stopped") {
		t.Fatalf("%s: %v, want 410 node_lost", what, err)
	}
}
