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
}

// newTestCluster prepares n servers; maxPayload 0 is NATS's default.
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
	c := &testCluster{t: t}
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
	for _, o := range c.opts {
		srv, err := natsserver.NewServer(o)
		if err != nil {
			c.t.Fatal(err)
		}
		c.t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
		wg.Go(func() {
			go srv.Start()
			if !srv.ReadyForConnections(30 * time.Second) {
				c.t.Errorf("NATS server %s not ready", o.ServerName)
			}
		})
	}
	wg.Wait()
	if c.t.Failed() {
		c.t.FailNow()
	}
}

// startCluster starts n clustered JetStream servers on loopback that take
// 8 MiB messages and returns their client URLs.
func startCluster(t *testing.T, n int) []string {
	t.Helper()
	c := newTestCluster(t, n, EmbeddedMaxPayload)
	c.start()
	return c.urls
}
