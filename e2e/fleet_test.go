package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
)

// health is the part of /health the fleet tests read.
type health struct {
	Node string `json:"node"`
	NATS struct {
		Mode      string `json:"mode"`
		Connected bool   `json:"connected"`
		Server    string `json:"server"`
	} `json:"nats"`
}

func getHealth(t *testing.T, url string) (health, error) {
	t.Helper()
	resp, err := http.Get(url + "/health")
	if err != nil {
		return health{}, err
	}
	defer resp.Body.Close()
	var h health
	err = json.NewDecoder(resp.Body).Decode(&h)
	return h, err
}

// TestFleetHealth starts three nodes on a three-server NATS cluster: each
// reports its name and its connection to the cluster.
func TestFleetHealth(t *testing.T) {
	fleetInParallel(t)
	urls := startNATSCluster(t, 3)
	fleet := startFleet(t, urls, 3)
	for i, s := range fleet {
		h, err := getHealth(t, s.url)
		if err != nil || h.Node != nodeName(i) || h.NATS.Mode != "cluster" || !h.NATS.Connected || h.NATS.Server == "" {
			t.Errorf("node %d: /health says node %q, nats %+v (%v); want node %q connected to the cluster", i, h.Node, h.NATS, err, nodeName(i))
		}
	}
}

// submitScript submits main.py = code as an async execution.
func submitScript(ctx context.Context, c *client.Client, code string) (string, error) {
	tar, err := client.TarFromMap(map[string]string{"main.py": code})
	if err != nil {
		return "", err
	}
	return c.ExecuteAsync(ctx, tar, &client.Metadata{Config: &client.ExecutionConfig{TimeoutSeconds: 60}})
}

// waitFinal waits until every id has a final record, read through the
// given nodes in turn (any node answers for any id), and returns them. On
// a timeout it reports each open id with its last state and the log lines
// of nodes and past (stopped instances) that name it.
func waitFinal(t *testing.T, nodes []*server, ids []string, timeout time.Duration, past ...*server) map[string]*client.ExecutionResult {
	t.Helper()
	ctx := context.Background()
	final := map[string]*client.ExecutionResult{}
	last := map[string]string{}
	deadline := time.Now().Add(timeout)
	for i := 0; len(final) < len(ids); i++ {
		for _, id := range ids {
			if final[id] != nil {
				continue
			}
			c := client.New(nodes[i%len(nodes)].url, client.WithTimeout(10*time.Second))
			r, err := c.GetExecution(ctx, id)
			switch {
			case err != nil:
				last[id] = err.Error()
			case r.Status.Final():
				final[id] = r
			default:
				last[id] = fmt.Sprintf("%s on node %q, started %v", r.Status, r.Node, r.StartedAt)
			}
		}
		if len(final) == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			var open []string
			for _, id := range ids {
				if final[id] == nil {
					open = append(open, fmt.Sprintf("%s: %s\n%s", id, last[id], logsAbout(append(past, nodes...), id)))
				}
			}
			t.Fatalf("%d of %d accepted executions have no final state after %s:\n%s", len(open), len(ids), timeout, strings.Join(open, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return final
}

// TestFleetRunsEverywhereAndAnswersForAnyID submits async executions to
// node a only: nodes b and c run some of them, and every node answers
// for every execution — its record, its events, its files, the listing.
func TestFleetRunsEverywhereAndAnswersForAnyID(t *testing.T) {
	fleetInParallel(t)
	fleet := startFleet(t, startNATSCluster(t, 3), 3, "--max-concurrency", "1")
	ctx := context.Background()
	a := client.New(fleet[0].url)
	const n = 12
	var ids []string
	for i := range n {
		code := fmt.Sprintf("import time, pathlib\ntime.sleep(0.5)\npathlib.Path('out.txt').write_text('result %d')\nprint('done %d')\n", i, i)
		id, err := submitScript(ctx, a, code)
		if err != nil {
			t.Fatalf("submitting %d to node a: %v", i, err)
		}
		// Accepted through a, known at once through c.
		if _, err := client.New(fleet[2].url).GetExecution(ctx, id); err != nil {
			t.Fatalf("execution %d accepted by node a, read through node c right after: %v", i, err)
		}
		ids = append(ids, id)
	}
	final := waitFinal(t, fleet, ids, 2*time.Minute)
	ran := map[string]int{}
	for i, id := range ids {
		r := final[id]
		if r.Status != client.StatusCompleted || r.Stdout != fmt.Sprintf("done %d\n", i) {
			t.Fatalf("execution %d: status %s stdout %q error %q", i, r.Status, r.Stdout, r.Error)
		}
		ran[r.Node]++
	}
	t.Logf("executions run per node: %v", ran)
	for _, node := range []string{"a", "b", "c"} {
		if ran[node] == 0 {
			t.Errorf("node %s ran none of the %d executions submitted to node a (ran: %v)", node, n, ran)
		}
	}

	for i, id := range ids {
		for j, s := range fleet {
			c := client.New(s.url)
			r, err := c.GetExecution(ctx, id)
			if err != nil || r.Status != client.StatusCompleted || r.Node != final[id].Node {
				t.Fatalf("GET %d via node %s: %v %+v, want completed on node %s", i, nodeName(j), err, r, final[id].Node)
			}
			if i%4 != 0 {
				continue // the rest for a few ids: events, files
			}
			var out strings.Builder
			for ev, err := range c.Follow(ctx, id) {
				if err != nil {
					t.Fatalf("events of %d via node %s: %v", i, nodeName(j), err)
				}
				if ev.Type == client.EventStdout {
					out.WriteString(ev.Data)
				}
			}
			if out.String() != fmt.Sprintf("done %d\n", i) {
				t.Errorf("events of %d via node %s carry stdout %q", i, nodeName(j), out.String())
			}
			body, err := c.DownloadFile(ctx, id, "out.txt")
			if err != nil {
				t.Fatalf("file of %d (ran on %s) via node %s: %v", i, final[id].Node, nodeName(j), err)
			}
			content, err := io.ReadAll(body)
			body.Close()
			if err != nil || string(content) != fmt.Sprintf("result %d", i) {
				t.Errorf("file of %d via node %s: %q %v", i, nodeName(j), content, err)
			}
		}
	}
	for j, s := range fleet {
		list, err := client.New(s.url).ListExecutions(ctx, client.ListOptions{Limit: 100})
		if err != nil {
			t.Fatalf("listing via node %s: %v", nodeName(j), err)
		}
		var listed []string
		for _, r := range list.Executions {
			listed = append(listed, r.ExecutionID)
		}
		for _, id := range ids {
			if !slices.Contains(listed, id) {
				t.Errorf("node %s does not list %s", nodeName(j), id)
			}
		}
	}
}

// TestFleetKillThroughANonOwner kills an endless loop through a node that
// does not run it: the owner stops it, the record says killed, and its
// process is gone.
func TestFleetKillThroughANonOwner(t *testing.T) {
	fleetInParallel(t)
	fleet := startFleet(t, startNATSCluster(t, 3), 3)
	ctx := context.Background()
	spin := "import ctypes\nctypes.CDLL(None).prctl(15, b'fleetspin')\nprint('spinning', flush=True)\nwhile True:\n    pass\n"
	id, err := submitScript(ctx, client.New(fleet[0].url), spin)
	if err != nil {
		t.Fatal(err)
	}
	var owner string
	eventually(t, 30*time.Second, "the loop to run", func() bool {
		r, err := client.New(fleet[1].url).GetExecution(ctx, id)
		if err == nil && r.Status == client.StatusRunning {
			owner = r.Node
		}
		return owner != "" && len(jailProcesses("fleetspin")) > 0
	})
	other := fleet[(slices.Index([]string{"a", "b", "c"}, owner)+1)%3]
	status, err := client.New(other.url).Kill(ctx, id)
	if err != nil || status != client.StatusKilled {
		t.Fatalf("DELETE via a non-owner: %v, status %s", err, status)
	}
	for j, s := range fleet {
		r, err := client.New(s.url).GetExecution(ctx, id)
		if err != nil || r.Status != client.StatusKilled || r.Node != owner {
			t.Errorf("via node %s: %v %+v, want killed on %s", nodeName(j), err, r, owner)
		}
	}
	eventually(t, 10*time.Second, "the killed loop's process to be gone", func() bool { return len(jailProcesses("fleetspin")) == 0 })
}

// submitLoop submits short executions round-robin to the nodes targets
// returns, until ids stops it (or the test ends); it keeps the ids the
// fleet accepted. A refused or failed submission was not accepted and is
// only counted.
type submitLoop struct {
	mu       sync.Mutex
	accepted []string
	refused  int
	quit     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func startSubmitLoop(t *testing.T, targets func() []string) *submitLoop {
	t.Helper()
	l := &submitLoop{quit: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { l.ids() })
	go func() {
		defer close(l.done)
		for i := 0; ; i++ {
			select {
			case <-l.quit:
				return
			default:
			}
			urls := targets()
			c := client.New(urls[i%len(urls)], client.WithTimeout(15*time.Second))
			id, err := submitScript(context.Background(), c, fmt.Sprintf("import time\ntime.sleep(0.2)\nprint(%d)\n", i))
			l.mu.Lock()
			if err == nil {
				l.accepted = append(l.accepted, id)
			} else {
				l.refused++
			}
			l.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return l
}

// ids stops the loop, waits for it and returns the accepted ids and the
// number of refused submissions.
func (l *submitLoop) ids() ([]string, int) {
	l.stopOnce.Do(func() { close(l.quit) })
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.accepted), l.refused
}

func (l *submitLoop) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

// TestFleetSurvivesALostNATSServer stops one of the three NATS servers,
// the JetStream meta leader, while executions are submitted to every node: the node that was
// connected to it reconnects to another, and every execution the fleet
// accepted reaches a final state (the store is replicated three times).
func TestFleetSurvivesALostNATSServer(t *testing.T) {
	fleetInParallel(t)
	cluster := newNATSCluster(t, 3)
	fleet := startFleet(t, cluster.urls(), 3)
	urls := func() []string { return []string{fleet[0].url, fleet[1].url, fleet[2].url} }
	loop := startSubmitLoop(t, urls)
	eventually(t, 30*time.Second, "a few accepted executions", func() bool { return loop.count() >= 5 })
	lost := cluster.metaLeader()
	cluster.stop(lost) // the JetStream meta leader, and node a, b or c's server
	before := loop.count()
	eventually(t, 30*time.Second, "node "+nodeName(lost)+" to reconnect to another NATS server", func() bool {
		h, err := getHealth(t, fleet[lost].url)
		return err == nil && h.NATS.Connected && h.NATS.Server != cluster.urls()[lost]
	})
	// nats.go calls the handlers that log it on a goroutine of its own:
	// the lines may follow the health report by a moment.
	eventually(t, 10*time.Second, "node "+nodeName(lost)+" to log losing and regaining NATS", func() bool {
		logs := fleet[lost].logs.String()
		return strings.Contains(logs, "lost the NATS server") && strings.Contains(logs, "reconnected to NATS")
	})
	eventually(t, 60*time.Second, "accepted executions after the loss", func() bool { return loop.count() >= before+10 })
	ids, refused := loop.ids()
	final := waitFinal(t, fleet, ids, 2*time.Minute)
	for _, id := range ids {
		if r := final[id]; r.Status != client.StatusCompleted {
			t.Errorf("%s: %s (%s) %s", id, r.Status, r.Reason, r.Error)
		}
	}
	t.Logf("%d accepted, %d refused while a NATS server was down", len(ids), refused)
}

// TestFleetRollingRestart restarts the three nodes one at a time
// (SIGTERM, wait until it exited, start it again) while executions are
// submitted to the nodes that are up, and a burst of one-second jobs goes
// through each node just before it stops: every accepted execution
// reaches a final state and completes.
//
// What the drain guarantees: a node that gets SIGTERM stops taking work
// (the API answers 503, so a submission to it is refused, not lost), lets
// its running executions finish within --shutdown-timeout, and leaves the
// jobs it had taken from the queue but not started unacked, so the queue
// hands them to another node after the ack wait (10s on a cluster), or the
// restarted node puts them back at once when it starts. Only
// an execution still running when the shutdown timeout ends would be
// stopped and recorded failed/node_lost; these run 0.2s against a 20s
// timeout, so each one completes.
func TestFleetRollingRestart(t *testing.T) {
	fleetInParallel(t)
	fleet := startFleet(t, startNATSCluster(t, 3), 3, "--shutdown-timeout", "20s")
	var mu sync.Mutex
	up := []bool{true, true, true}
	urls := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for i, s := range fleet {
			if up[i] {
				out = append(out, s.url)
			}
		}
		return out
	}
	loop := startSubmitLoop(t, urls)
	eventually(t, 30*time.Second, "a few accepted executions", func() bool { return loop.count() >= 5 })
	var burst []string
	var past []*server // stopped instances, for their logs
	for i := range fleet {
		// A burst through the node about to stop, so that it is busy and
		// holds jobs from the queue when SIGTERM comes.
		for k := range 6 {
			id, err := submitScript(context.Background(), client.New(fleet[i].url), fmt.Sprintf("import time\ntime.sleep(1)\nprint('burst %d')\n", k))
			if err != nil {
				t.Fatalf("burst to node %s: %v", nodeName(i), err)
			}
			burst = append(burst, id)
		}
		mu.Lock()
		up[i] = false
		old := fleet[i]
		mu.Unlock()
		fresh := restartFleetNode(t, old)
		past = append(past, old)
		mu.Lock()
		fleet[i], up[i] = fresh, true
		mu.Unlock()
		n := loop.count()
		eventually(t, 30*time.Second, "accepted executions after restarting node "+nodeName(i), func() bool { return loop.count() >= n+5 })
	}
	ids, refused := loop.ids()
	ids = append(ids, burst...)
	final := waitFinal(t, fleet, ids, 2*time.Minute, past...)
	ran := map[string]int{}
	for _, id := range ids {
		r := final[id]
		if r.Status != client.StatusCompleted {
			t.Errorf("%s on node %q (started %v): %s (%s) %s\n%s", id, r.Node, r.StartedAt, r.Status, r.Reason, r.Error,
				logsAbout(append(past, fleet...), id))
		}
		ran[r.Node]++
	}
	t.Logf("%d accepted, %d refused during the rolling restart; ran per node: %v", len(ids), refused, ran)
}

// logsAbout returns the log lines of servers that mention id.
func logsAbout(servers []*server, id string) string {
	var out []string
	for _, s := range servers {
		for _, line := range strings.Split(s.logs.String(), "\n") {
			if strings.Contains(line, id) {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestFleetRefusesBadClusterSettings: serve fails at start, naming the
// setting, when given a node name that is not a subject token (more
// replicas than servers is waited out: TestFleetWaitsForEnoughServers).
func TestFleetRefusesBadClusterSettings(t *testing.T) {
	fleetInParallel(t)
	urls := startNATSCluster(t, 3)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a node name with a dot", []string{"--nats", urls[0], "--node-name", "a.b"}, "PYEXEC_NODE_NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			argv := append([]string{"serve", "--port", fmt.Sprint(freePort(t)), "--data-dir", t.TempDir(),
				"--cgroup-parent", cgroupParent, "--prepare-base=false", "--provision-tools=false"}, tt.args...)
			cmd := exec.CommandContext(ctx, binary, argv...)
			cmd.Env = cleanEnv()
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Fatalf("serve %v: %v, want a start error containing %q:\n%s", tt.args, err, tt.want, out)
			}
		})
	}
}
