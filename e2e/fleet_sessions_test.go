package e2e

import (
	"context"
	"errors"
	"net/http"
	"strconv"
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
	t.Logf("the lost session's error came %s after the kill", took)
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

// TestFleetSessionPlacement fills a fleet whose nodes hold one session
// each, every create sent to a: the sessions spread over a, b and c, each
// answers through a, and the fourth create is a 429 that says the fleet is
// full.
func TestFleetSessionPlacement(t *testing.T) {
	fleetInParallel(t)
	fleet := startFleet(t, startNATSCluster(t, 3), 3, "--max-sessions", "1")
	a := client.New(fleet[0].url)
	ctx := context.Background()
	for i := range 3 {
		s, err := a.CreateSession(ctx, &client.SessionRequest{Requirements: "-"})
		if err != nil {
			t.Fatalf("create %d via a: %v", i+1, err)
		}
		res, err := a.ExecuteCell(ctx, s.SessionID, &client.CellRequest{Code: "import os; os.getpid() > 0"})
		if err != nil || res.Result == nil || *res.Result != "True" {
			t.Fatalf("a cell of session %d via a: %+v, %v", i+1, res, err)
		}
	}
	for i, n := range fleet {
		if got := liveSessions(t, n.url, ""); got != 1 {
			t.Errorf("node %s holds %d sessions, want 1", nodeName(i), got)
		}
		list, err := client.New(n.url).ListSessions(ctx)
		if err != nil || len(list) != 3 {
			t.Fatalf("node %s lists %d sessions (%v), want the fleet's 3", nodeName(i), len(list), err)
		}
	}
	_, err := a.CreateSession(ctx, &client.SessionRequest{Requirements: "-"})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || !strings.Contains(apiErr.Message, "no other node of the fleet has a free slot") {
		t.Fatalf("a create on a full fleet: %v, want 429 naming the fleet", err)
	}
}

// liveSessions reads the pyexec_sessions gauge of a node's /metrics,
// with key if the node needs one.
func liveSessions(t *testing.T, url, key string) int {
	t.Helper()
	code, body := fetch(t, url+"/metrics", key)
	if code != http.StatusOK {
		t.Fatalf("%s/metrics: %d %s", url, code, body)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "pyexec_sessions "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("pyexec_sessions %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("no pyexec_sessions in %s/metrics", url)
	return 0
}

func assertNodeLost(t *testing.T, err error, what string) {
	t.Helper()
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusGone ||
		!strings.Contains(apiErr.Message, "node_lost: the node running this session stopped") {
		t.Fatalf("%s: %v, want 410 node_lost", what, err)
	}
}
