package e2e

import (
	"testing"

	"github.com/pyexec/pyexec/internal/testserver"
)

// natsCluster is a NATS JetStream cluster of in-process servers on
// loopback (a testserver.Cluster that fails the test on an error). Its
// servers can be stopped, as lost NATS nodes.
type natsCluster struct {
	t *testing.T
	c *testserver.Cluster
}

// fleetInParallel marks a fleet test that may run beside another such
// test: it owns its NATS cluster, its nodes and their data directories, it
// looks for no process or cgroup but its own (the nodes' jail names carry
// their instance), and it bounds nothing more tightly than tens of
// seconds. Most of such a test's time is waiting for nodes to start, stop
// and find each other, so two at a time (go test's -parallel, GOMAXPROCS
// by default) take about half the wall clock. They run after the
// package's other tests (go test runs top-level parallel tests last), so
// no server of theirs is up while a serial test counts leftovers. The
// fleet tests with a tight bound stay serial: node loss within 11 s
// (TestFleetNodeLoss), a lost session's error within 5 s
// (TestFleetSessions), refusals within 2 s (TestFleetPreview), the fair
// queue's limit (TestFleetFairFloodDoesNotStarveOtherKey) and cells
// shorter than the checkpoint interval
// (TestFleetKillResumesFromCheckpoints).
func fleetInParallel(t *testing.T) {
	t.Helper()
	needRoot(t)
	t.Parallel()
}

// startNATSCluster starts n clustered servers and returns their client
// URLs once the cluster has a JetStream meta leader.
func startNATSCluster(t *testing.T, n int) []string {
	t.Helper()
	return newNATSCluster(t, n).urls()
}

// newNATSCluster is startNATSCluster with the handle to stop single
// servers. The servers shut down when the test ends.
func newNATSCluster(t *testing.T, n int) *natsCluster {
	t.Helper()
	c, err := testserver.StartCluster("pyexec-e2e", n, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &natsCluster{t: t, c: c}
}

// urls are the client URLs, one per server.
func (c *natsCluster) urls() []string { return c.c.URLs() }

// stop shuts server i down, as a lost NATS node; a stopped one is left.
func (c *natsCluster) stop(i int) { c.c.Stop(i) }

// metaLeader is the index of the running server that leads JetStream's
// meta group.
func (c *natsCluster) metaLeader() int {
	c.t.Helper()
	i, err := c.c.MetaLeader()
	if err != nil {
		c.t.Fatal(err)
	}
	return i
}

// startFleet starts n `pyexec serve` processes named a, b, c… on their
// own data directories, server i connected to urls[i mod len(urls)] with
// --nats (the client learns the cluster's other servers from it); args
// come last, so they win.
func startFleet(t *testing.T, urls []string, n int, args ...string) []*server {
	t.Helper()
	fleet := make([]*server, n)
	for i := range n {
		fleet[i] = startFleetNode(t, urls[i%len(urls)], nodeName(i), args...)
	}
	return fleet
}

// nodeName is the fleet's name of node i: a, b, c…
func nodeName(i int) string { return string(rune('a' + i)) }

// startFleetNode starts one node of a fleet on a fresh data directory.
func startFleetNode(t *testing.T, url, name string, args ...string) *server {
	t.Helper()
	argv := append([]string{"--nats", url, "--node-name", name}, args...)
	return startServer(t, t.TempDir(), argv...)
}

// restartFleetNode stops s gracefully (SIGTERM, waiting for its drain) and
// starts it again with the same data directory, name and flags, on a new
// port.
func restartFleetNode(t *testing.T, s *server) *server {
	t.Helper()
	s.stop(t)
	return startServerEnv(t, s.dataDir, s.env, s.args...)
}
