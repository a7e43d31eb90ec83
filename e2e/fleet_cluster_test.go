package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsMaxPayload is the cluster's max_payload: the recommended 8 MiB,
// under which no record spills (TestFleetOnStockNATS runs on the default).
const natsMaxPayload = 8 << 20

// natsCluster is a NATS JetStream cluster of in-process servers on
// loopback, one store directory each. Its servers can be stopped and
// started again (same ports, same data) to play a lost NATS node.
type natsCluster struct {
	t       *testing.T
	clients []int // client port of each server
	routes  []int // cluster (route) port of each server
	dirs    []string
	servers []*natsserver.Server // nil while stopped
}

// startNATSCluster starts n clustered servers and returns their client
// URLs once the cluster has a JetStream meta leader.
func startNATSCluster(t *testing.T, n int) []string {
	t.Helper()
	return newNATSCluster(t, n).urls()
}

// newNATSCluster is startNATSCluster with the handle to stop and restart
// single servers. The servers shut down when the test ends.
func newNATSCluster(t *testing.T, n int) *natsCluster {
	t.Helper()
	c := prepareNATSCluster(t, n)
	for i := range n {
		c.start(i)
	}
	c.waitMetaLeader()
	return c
}

// urls are the client URLs, one per server.
func (c *natsCluster) urls() []string {
	var urls []string
	for _, p := range c.clients {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return urls
}

func (c *natsCluster) options(i int) *natsserver.Options {
	var routes []string
	for j, p := range c.routes {
		if j != i {
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
		}
	}
	return &natsserver.Options{
		ServerName: fmt.Sprintf("nats-%d", i),
		Host:       "127.0.0.1",
		Port:       c.clients[i],
		JetStream:  true,
		StoreDir:   filepath.Join(c.dirs[i], "jetstream"),
		MaxPayload: natsMaxPayload,
		NoSigs:     true,
		NoLog:      true,
		Cluster: natsserver.ClusterOpts{
			Name: "pyexec-e2e",
			Host: "127.0.0.1",
			Port: c.routes[i],
		},
		Routes: natsserver.RoutesFromStr(strings.Join(routes, ",")),
	}
}

// start starts server i (again) on its ports and data.
func (c *natsCluster) start(i int) {
	c.t.Helper()
	if c.servers[i] != nil {
		c.t.Fatalf("NATS server %d is already running", i)
	}
	srv, err := natsserver.NewServer(c.options(i))
	if err != nil {
		c.t.Fatalf("creating NATS server %d: %v", i, err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		c.t.Fatalf("NATS server %d did not become ready", i)
	}
	c.servers[i] = srv
}

// stop shuts server i down, as a lost NATS node; a stopped one is left.
func (c *natsCluster) stop(i int) {
	if srv := c.servers[i]; srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		c.servers[i] = nil
	}
}

// metaLeader is the index of the running server that leads JetStream's
// meta group.
func (c *natsCluster) metaLeader() int {
	c.t.Helper()
	for i, srv := range c.servers {
		if srv != nil && srv.JetStreamIsLeader() {
			return i
		}
	}
	c.t.Fatal("no NATS server leads the JetStream meta group")
	return -1
}

// waitMetaLeader waits until JetStream answers through every running
// server, which needs a meta leader elected by the cluster.
func (c *natsCluster) waitMetaLeader() {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for i, srv := range c.servers {
		if srv == nil {
			continue
		}
		for {
			err := jetStreamAnswers(c.urls()[i])
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("NATS server %d: JetStream not ready after 60s: %v", i, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// jetStreamAnswers asks JetStream for the account's info through url.
func jetStreamAnswers(url string) error {
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
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
