package store

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// testCluster is n clustered JetStream servers on loopback whose ports
// are chosen before any of them runs, so that clients may be started
// first. The servers shut down when the test ends.
type testCluster struct {
	t    *testing.T
	opts []*natsserver.Options
	urls []string
	srvs []*natsserver.Server // the running ones, by index (nil: not running)
}

// newTestCluster prepares n servers; maxPayload 0 is NATS's default.
// Each cluster has its own ports and directories, so the tests whose time
// goes to waiting for a cluster to form, lose its majority or come back
// (their bounds are a minute or more) run beside each other (t.Parallel),
// two at a time with go test's default -parallel on two cores.
func newTestCluster(t *testing.T, n int, maxPayload int32) *testCluster {
	t.Helper()
	port := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	clients, routes := make([]int, n), make([]int, n)
	for i := range n {
		clients[i], routes[i] = port(), port()
	}
	c := &testCluster{t: t, srvs: make([]*natsserver.Server, n)}
	for i := range n {
		var peers []string
		for j, p := range routes {
			if j != i {
				peers = append(peers, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
			}
		}
		c.opts = append(c.opts, &natsserver.Options{
			ServerName: fmt.Sprintf("s%d", i), Host: "127.0.0.1", Port: clients[i], JetStream: true,
			StoreDir: filepath.Join(t.TempDir(), "js"), MaxPayload: maxPayload, NoSigs: true, NoLog: true,
			Cluster: natsserver.ClusterOpts{Name: "store-test", Host: "127.0.0.1", Port: routes[i]},
			Routes:  natsserver.RoutesFromStr(strings.Join(peers, ",")),
		})
		c.urls = append(c.urls, fmt.Sprintf("nats://127.0.0.1:%d", clients[i]))
	}
	return c
}

// start starts every server at the same moment and returns once each
// takes connections (JetStream may still be electing its leader).
func (c *testCluster) start() {
	c.t.Helper()
	var wg sync.WaitGroup
	for i := range c.opts {
		wg.Go(func() { c.startServer(i) })
	}
	wg.Wait()
	if c.t.Failed() {
		c.t.FailNow()
	}
}

// startServer starts server i (again: with the data it had) and returns
// once it takes connections.
func (c *testCluster) startServer(i int) {
	o := c.opts[i]
	srv, err := natsserver.NewServer(o)
	if err != nil {
		c.t.Error(err)
		return
	}
	c.srvs[i] = srv
	c.t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		c.t.Errorf("NATS server %s not ready", o.ServerName)
	}
}

// stopServer shuts server i down.
func (c *testCluster) stopServer(i int) {
	c.srvs[i].Shutdown()
	c.srvs[i].WaitForShutdown()
	c.srvs[i] = nil
}

// startCluster starts n clustered JetStream servers on loopback that take
// 8 MiB messages and returns their client URLs.
func startCluster(t *testing.T, n int) []string {
	t.Helper()
	c := newTestCluster(t, n, EmbeddedMaxPayload)
	c.start()
	return c.urls
}
