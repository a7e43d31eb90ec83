package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
)

// settleWithin is how long after a restart every execution accepted
// before a kill -9 may take to reach its final state.
const settleWithin = 5 * time.Second

// healthyWithin is how soon after a restart /health must answer (it took
// 0.3 to 0.7 s on a loaded 2-core machine).
const healthyWithin = 2 * time.Second

// accepted is an async execution the server accepted, and the stdout it
// must have if it completes.
type accepted struct {
	id, want string
}

// TestCrashRestartSettlesEveryID is the developers' soak crash phase
// (bench/soak) as a test: kill -9 while four clients submit async
// executions, restart on the same data directory, three times. After each
// restart every id ever accepted is final within settleWithin of the
// restart (completed with its own output, or failed node_lost), none is
// lost, no process of the killed server is left, and /health answered
// within healthyWithin.
func TestCrashRestartSettlesEveryID(t *testing.T) {
	needRoot(t)
	parent := ownCgroupParent(t, "settle")
	data := t.TempDir()
	args := []string{"--cgroup-parent", parent, "--warm-pool", "--fork-server", "--queue-size", "1000"}
	s := startServer(t, data, args...)
	var all []accepted
	for round := range 3 {
		all = append(all, submitUntilKill(t, s, round)...)
		eventually(t, 10*time.Second, "the killed server's jail processes to die with it", func() bool {
			return len(processesUnder(parent)) == 0
		})
		restart := time.Now()
		s = startServer(t, data, args...)
		healthy := time.Since(restart)
		took, statuses := settleAll(t, client.New(s.url), all, restart)
		slowest := slices.Max(took)
		slices.Sort(took)
		t.Logf("round %d: %d ids, /health after %.2f s, final after: median %.2f s, max %.2f s; %v",
			round+1, len(all), healthy.Seconds(), took[len(took)/2].Seconds(), slowest.Seconds(), statuses)
		if healthy > healthyWithin {
			t.Errorf("round %d: /health answered %.2f s after the restart, want at most %s", round+1, healthy.Seconds(), healthyWithin)
		}
		if slowest > settleWithin {
			t.Errorf("round %d: the last execution was final %.2f s after the restart, want at most %s\n%s",
				round+1, slowest.Seconds(), settleWithin, s.logs.String())
		}
	}
}

// submitEvery paces each of submitUntilKill's clients. Four clients at
// one submit per 400 ms offer about 10 executions a second to a node
// that runs about 6 (two slots, 0.3 s each), so a few are queued at the
// kill, as in the soak runs the 5 s goal was set on (about 33 ids a
// round). Unpaced, a client submits every few milliseconds (imports are
// read in the server) and a thousand jobs queue in two seconds: draining
// them takes minutes whatever the restart does, and the test would time
// the drain, not the recovery.
const submitEvery = 400 * time.Millisecond

// submitUntilKill has four clients submit async executions (each sleeps
// 0.3 s, then prints its number) for two seconds, every submitEvery, then
// kills the server with SIGKILL. It returns the executions the server
// accepted.
func submitUntilKill(t *testing.T, s *server, round int) []accepted {
	t.Helper()
	ctx := context.Background()
	c := client.New(s.url)
	var (
		mu   sync.Mutex
		jobs []accepted
		wg   sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := fmt.Sprint(round*100_000 + w*10_000 + i)
				tar, err := client.TarFromMap(map[string]string{"main.py": "import time\ntime.sleep(0.3)\nprint(" + n + ")\n"})
				if err != nil {
					t.Error(err)
					return
				}
				id, err := c.ExecuteAsync(ctx, tar, &client.Metadata{})
				if err != nil {
					continue // refused, or the server is gone: not accepted
				}
				mu.Lock()
				jobs = append(jobs, accepted{id: id, want: n + "\n"})
				mu.Unlock()
				select {
				case <-stop:
					return
				case <-time.After(submitEvery):
				}
			}
		})
	}
	time.Sleep(2 * time.Second)
	s.crash()
	close(stop)
	wg.Wait()
	if len(jobs) == 0 {
		t.Fatalf("round %d: no execution accepted before the kill", round+1)
	}
	return jobs
}

// settleAll waits until every execution is final and returns how long
// after restart each became so (as seen by polling), and how many ended
// in each status and reason. A lost execution (404) or a completed one
// with another output fails the test.
func settleAll(t *testing.T, c *client.Client, jobs []accepted, restart time.Time) ([]time.Duration, map[string]int) {
	t.Helper()
	ctx := context.Background()
	took := make([]time.Duration, len(jobs))
	statuses := map[string]int{}
	pending := slices.Clone(jobs)
	index := map[string]int{}
	for i, j := range jobs {
		index[j.id] = i
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(pending) > 0 {
		var next []accepted
		for _, j := range pending {
			r, err := c.GetExecution(ctx, j.id)
			var ae *client.APIError
			switch {
			case errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound:
				t.Errorf("execution %s lost after the restart", j.id)
			case err != nil:
				t.Fatalf("reading %s: %v", j.id, err)
			case r.Status == client.StatusCompleted || r.Status == client.StatusFailed || r.Status == client.StatusKilled:
				took[index[j.id]] = time.Since(restart)
				statuses[string(r.Status)+"/"+string(r.Reason)]++
				if r.Status == client.StatusCompleted && r.Stdout != j.want {
					t.Errorf("%s completed with stdout %q, want %q", j.id, r.Stdout, j.want)
				}
				if r.Status != client.StatusCompleted && r.Reason != client.ReasonNodeLost {
					t.Errorf("%s: %s %s %q, want completed or failed node_lost", j.id, r.Status, r.Reason, r.Error)
				}
			default:
				next = append(next, j)
			}
		}
		pending = next
		if len(pending) > 0 && time.Now().After(deadline) {
			t.Fatalf("%d executions not final 2 minutes after the restart", len(pending))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return took, statuses
}
