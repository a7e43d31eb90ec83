package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
	"github.com/pyexec/pyexec/internal/testserver"
)

// A fleet starts in any order: its nodes at the same moment on a fresh
// cluster, or before the NATS servers, all become healthy without a
// restart; a node that waits says so on /health (503).

// launchNode starts `pyexec serve` as node name of a fleet on natsURL and
// returns at once: the node may wait for NATS. It is stopped when the
// test ends.
func launchNode(t *testing.T, natsURL, name string, args ...string) *server {
	t.Helper()
	dataDir, env := t.TempDir(), cleanEnv()
	args = append([]string{"--nats", natsURL, "--node-name", name}, args...)
	ts := testserver.New(testserver.Config{Binary: binary, Dir: dataDir, CgroupParent: cgroupParent, Env: env,
		Flags:        append([]string{"--prepare-base=false", "--provision-tools=false"}, args...),
		StartTimeout: 3 * time.Minute, StopTimeout: 45 * time.Second})
	if err := ts.Launch(); err != nil {
		t.Fatal(err)
	}
	s := &server{url: ts.URL, cmd: ts.Cmd, logs: ts.Logs, waited: ts.Exited, dataDir: dataDir, env: env, args: args, ts: ts}
	t.Cleanup(func() { s.stop(t) })
	return s
}

// healthStatus returns the HTTP status, "status" and "detail" of s's
// /health; 0 while nothing answers.
func healthStatus(s *server) (int, string, string) {
	resp, err := http.Get(s.url + "/health")
	if err != nil {
		return 0, "", ""
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Detail string `json:"detail"`
	}
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &body)
	return resp.StatusCode, body.Status, body.Detail
}

// waitHealthy waits until every node's /health answers 200 (within the
// 3 minutes of launchNode); a node that exits fails the test at once: a
// fleet must come up without restarts.
func waitHealthy(t *testing.T, nodes []*server) {
	t.Helper()
	for _, s := range nodes {
		if err := s.ts.WaitHealthy(context.Background()); err != nil {
			t.Fatalf("node %s: %v", s.url, err)
		}
	}
}

// checkFleetRuns runs code through each node and checks the output.
func checkFleetRuns(t *testing.T, nodes []*server) {
	t.Helper()
	for i, s := range nodes {
		r, err := client.New(s.url).Eval(context.Background(), &client.SimpleExecRequest{Code: fmt.Sprintf("print(%d * 7)", i)})
		if err != nil || r.Status != client.StatusCompleted || r.Stdout != fmt.Sprintf("%d\n", i*7) {
			t.Errorf("node %d: %v %+v", i, err, r)
		}
	}
}

// TestFleetStartsAtTheSameMoment: three nodes started at once on a fresh
// three-server cluster (leader elected, no asset yet) create the same
// streams and buckets concurrently and all become healthy.
func TestFleetStartsAtTheSameMoment(t *testing.T) {
	fleetInParallel(t)
	urls := startNATSCluster(t, 3)
	nodes := make([]*server, 3)
	for i := range nodes {
		nodes[i] = launchNode(t, urls[i], nodeName(i))
	}
	waitHealthy(t, nodes)
	checkFleetRuns(t, nodes)
}

// TestFleetStartsBeforeNATS: three nodes started before any of the three
// NATS servers wait, saying so on /health with a 503, and become healthy
// once the servers come up.
func TestFleetStartsBeforeNATS(t *testing.T) {
	fleetInParallel(t)
	c := prepareNATSCluster(t, 3, testserver.NATSMaxPayload)
	nodes := make([]*server, 3)
	for i := range nodes {
		nodes[i] = launchNode(t, c.urls()[i], nodeName(i))
	}
	for _, s := range nodes {
		eventually(t, time.Minute, "a node waiting for NATS to say so on /health", func() bool {
			code, status, detail := healthStatus(s)
			return code == http.StatusServiceUnavailable && status == "waiting for NATS" && strings.Contains(detail, "connecting to NATS")
		})
	}
	if !strings.Contains(nodes[0].logs.String(), "waiting for NATS") {
		t.Errorf("a waiting node logs nothing about it:\n%s", nodes[0].logs)
	}
	c.startAll()
	waitHealthy(t, nodes)
	checkFleetRuns(t, nodes)
}

// TestFleetWaitsForEnoughServers: a node asking for more replicas than
// the cluster runs servers waits for more to join, saying why on /health
// and in its log, instead of exiting.
func TestFleetWaitsForEnoughServers(t *testing.T) {
	fleetInParallel(t)
	urls := startNATSCluster(t, 3)
	s := launchNode(t, urls[0], "a", "--nats-replicas", "5")
	eventually(t, time.Minute, "the node to say on /health why it waits", func() bool {
		code, status, detail := healthStatus(s)
		return code == http.StatusServiceUnavailable && status == "waiting for NATS" &&
			strings.Contains(detail, "fewer servers") && strings.Contains(detail, "--nats-replicas")
	})
	select {
	case <-s.waited:
		t.Fatalf("the node exited:\n%s", s.logs)
	default:
	}
}

// prepareNATSCluster is a cluster of n servers taking messages of up to
// maxPayload bytes (0: NATS's default) whose ports and data are chosen
// but whose servers do not run yet (startAll starts them).
func prepareNATSCluster(t *testing.T, n int, maxPayload int32) *natsCluster {
	t.Helper()
	c, err := testserver.NewCluster("pyexec-e2e", n, t.TempDir(), maxPayload)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &natsCluster{t: t, c: c}
}

// startAll starts every server of c at the same moment; the cluster's
// leader may still be elected when it returns.
func (c *natsCluster) startAll() {
	c.t.Helper()
	if err := c.c.StartAll(); err != nil {
		c.t.Fatal(err)
	}
}

// TestFleetOnStockNATS: a fleet on NATS servers with NATS's default
// max_payload (1 MB) runs an execution that prints 5 MiB and shows a
// 3 MB rich output, and one that uploads a 20 MiB file, each submitted
// through one node and read through the other.
func TestFleetOnStockNATS(t *testing.T) {
	fleetInParallel(t)
	c := prepareNATSCluster(t, 3, 0) // NATS's default max_payload
	c.startAll()
	if err := c.c.WaitJetStream(time.Minute); err != nil {
		t.Fatal(err)
	}
	nodes := []*server{
		launchNode(t, c.urls()[0], "a", "--max-archive-file-bytes", "32MiB"),
		launchNode(t, c.urls()[1], "b", "--max-archive-file-bytes", "32MiB"),
	}
	waitHealthy(t, nodes)
	ctx := context.Background()
	a, b := client.New(nodes[0].url), client.New(nodes[1].url)

	const printed = 5 << 20
	code := fmt.Sprintf(`import sys
sys.stdout.write("0123456789abcdef" * (%d // 16))
class Big:
    def _repr_html_(self):
        return "<pre>" + "z" * 3000000 + "</pre>"
display(Big())
`, printed)
	r, err := a.Eval(ctx, &client.SimpleExecRequest{Code: code})
	if err != nil {
		t.Fatal(err)
	}
	checkBig := func(how string, r *client.ExecutionResult) {
		t.Helper()
		if r.Status != client.StatusCompleted || r.ExitCode != 0 || len(r.Stdout) != printed ||
			r.Stdout != strings.Repeat("0123456789abcdef", printed/16) {
			t.Errorf("%s: %s exit %d, %d bytes of stdout (want %d): %s %s", how, r.Status, r.ExitCode, len(r.Stdout), printed, r.Error, r.Stderr)
		}
		if len(r.Outputs) != 1 {
			t.Fatalf("%s: %d outputs, want the 3 MB HTML one", how, len(r.Outputs))
		}
		if html, _ := r.Outputs[0].Text("text/html"); len(html) != 3000011 {
			t.Errorf("%s: the HTML output has %d bytes, want 3000011", how, len(html))
		}
	}
	checkBig("the answer", r)
	again, err := b.GetExecution(ctx, r.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	checkBig("read through the other node", again)

	data := make([]byte, 20<<20)
	for i := range data {
		data[i] = byte(i * 7 % 251)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "blob.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.py"), []byte(
		"import hashlib\nprint(hashlib.sha256(open('blob.bin','rb').read()).hexdigest())\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tar, err := client.TarFromDirectory(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.ExecuteAsync(ctx, tar, &client.Metadata{Entrypoint: "main.py"})
	if err != nil {
		t.Fatalf("submitting 20 MiB: %v", err)
	}
	final := waitFinal(t, []*server{nodes[1]}, []string{id}, 2*time.Minute)[id]
	if want := fmt.Sprintf("%x\n", sha256.Sum256(data)); final.Status != client.StatusCompleted || final.Stdout != want {
		t.Errorf("the 20 MiB upload: %s %q %s, want %q", final.Status, final.Stdout, final.Error, want)
	}
}
