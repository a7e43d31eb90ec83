package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSMaxPayload is StartCluster's max_payload: the recommended 8 MiB,
// under which no record spills to the object store (NewCluster takes
// NATS's default, 1 MB, as well).
const NATSMaxPayload = 8 << 20

// Cluster is a NATS JetStream cluster of in-process servers on loopback,
// one store directory each. Its servers can be stopped and started again
// (same ports, same data) to play a lost NATS node.
type Cluster struct {
	name       string
	dir        string
	ownDir     bool
	maxPayload int32 // 0: NATS's default
	clients    []int // client port of each server
	routes     []int // cluster (route) port of each server
	servers    []*natsserver.Server
}

// StartCluster starts n clustered servers named name-0, name-1… with their
// stores below dir ("" makes a temporary directory that Close removes),
// and waits until JetStream answers through each, which needs a meta
// leader elected by the cluster.
func StartCluster(name string, n int, dir string) (_ *Cluster, err error) {
	c, err := NewCluster(name, n, dir, NATSMaxPayload)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	for i := range n {
		if err := c.startFresh(i); err != nil {
			return nil, err
		}
	}
	return c, c.WaitJetStream(60 * time.Second)
}

// startFresh starts server i for the first time, on other ports if one of
// its own was taken: FreePort's port is free when chosen, but any process
// may bind it, or get it as an outgoing connection's local port, before
// the server listens (seen in CI: "NATS server 2 did not become ready").
// Nobody has been given the server's URL yet, and the servers started
// before it learn its route from its own connections to them.
func (c *Cluster) startFresh(i int) error {
	for try := 1; ; try++ {
		err := c.Start(i)
		if try == 3 || !errors.Is(err, errNotListening) {
			return err
		}
		if c.clients[i], err = FreePort(); err != nil {
			return err
		}
		if c.routes[i], err = FreePort(); err != nil {
			return err
		}
	}
}

// NewCluster chooses the ports and directories of n clustered servers
// (n = 1: one standalone server) that take messages of up to maxPayload
// bytes (0: NATS's default, 1 MB), and starts none of them: clients may
// be started first (Start, StartAll).
func NewCluster(name string, n int, dir string, maxPayload int32) (_ *Cluster, err error) {
	c := &Cluster{name: name, dir: dir, maxPayload: maxPayload, servers: make([]*natsserver.Server, n)}
	if dir == "" {
		if c.dir, err = os.MkdirTemp("", "pyexec-nats-"); err != nil {
			return nil, err
		}
		c.ownDir = true
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	for range n {
		client, err := FreePort()
		if err != nil {
			return nil, err
		}
		route, err := FreePort()
		if err != nil {
			return nil, err
		}
		c.clients, c.routes = append(c.clients, client), append(c.routes, route)
	}
	return c, nil
}

// StartAll starts every server at the same moment and returns once each
// takes connections (JetStream may still be electing its leader).
func (c *Cluster) StartAll() error {
	errs := make([]error, len(c.servers))
	var wg sync.WaitGroup
	for i := range c.servers {
		wg.Go(func() { errs[i] = c.Start(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// URLs are the client URLs, one per server.
func (c *Cluster) URLs() []string {
	var urls []string
	for _, p := range c.clients {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return urls
}

func (c *Cluster) options(i int) *natsserver.Options {
	var routes []string
	for j, p := range c.routes {
		if j != i {
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
		}
	}
	o := &natsserver.Options{
		ServerName: fmt.Sprintf("%s-%d", c.name, i),
		Host:       "127.0.0.1",
		Port:       c.clients[i],
		JetStream:  true,
		StoreDir:   filepath.Join(c.dir, fmt.Sprint(i), "jetstream"),
		MaxPayload: c.maxPayload,
		NoSigs:     true,
		NoLog:      true,
		Cluster: natsserver.ClusterOpts{
			Name: c.name,
			Host: "127.0.0.1",
			Port: c.routes[i],
		},
		Routes: natsserver.RoutesFromStr(strings.Join(routes, ",")),
	}
	if len(c.servers) == 1 {
		// A standalone server: one with a cluster block waits for peers,
		// its JetStream unavailable (a minute, then a bench gave up).
		o.Cluster, o.Routes = natsserver.ClusterOpts{}, nil
	}
	return o
}

// Start starts server i (again) on its ports and data.
func (c *Cluster) Start(i int) error {
	if c.servers[i] != nil {
		return fmt.Errorf("NATS server %d is already running", i)
	}
	srv, err := natsserver.NewServer(c.options(i))
	if err != nil {
		return fmt.Errorf("creating NATS server %d: %w", i, err)
	}
	fatal := make(chan string, 1)
	srv.SetLogger(fatalLogger(fatal), false, false)
	go srv.Start()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if srv.ReadyForConnections(100 * time.Millisecond) {
			c.servers[i] = srv
			return nil
		}
		select {
		case msg := <-fatal:
			srv.Shutdown()
			return fmt.Errorf("NATS server %d: %s: %w", i, msg, errNotListening)
		default:
		}
		if time.Now().After(deadline) {
			srv.Shutdown()
			return fmt.Errorf("NATS server %d did not become ready", i)
		}
	}
}

// errNotListening is a server's start that failed on its own: it could
// not listen on a port, or reported another fatal error.
var errNotListening = errors.New("the server stopped before it listened")

// fatalLogger hands on the first fatal error a NATS server reports and
// drops the rest of its log. A server that cannot listen on a port says
// so only there: it does not stop, it never becomes ready.
type fatalLogger chan<- string

func (l fatalLogger) Fatalf(format string, v ...any) {
	select {
	case l <- fmt.Sprintf(format, v...):
	default:
	}
}
func (fatalLogger) Noticef(string, ...any) {}
func (fatalLogger) Warnf(string, ...any)   {}
func (fatalLogger) Errorf(string, ...any)  {}
func (fatalLogger) Debugf(string, ...any)  {}
func (fatalLogger) Tracef(string, ...any)  {}

// Stop shuts server i down, as a lost NATS node; a stopped one is left.
func (c *Cluster) Stop(i int) {
	if srv := c.servers[i]; srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		c.servers[i] = nil
	}
}

// Close stops every server, and removes the stores when StartCluster made
// their directory.
func (c *Cluster) Close() {
	for i := range c.servers {
		c.Stop(i)
	}
	if c.ownDir {
		os.RemoveAll(c.dir)
	}
}

// MetaLeader is the index of the running server that leads JetStream's
// meta group.
func (c *Cluster) MetaLeader() (int, error) {
	for i, srv := range c.servers {
		if srv != nil && srv.JetStreamIsLeader() {
			return i, nil
		}
	}
	return -1, errors.New("no NATS server leads the JetStream meta group")
}

// WaitJetStream waits until JetStream answers through every running
// server.
func (c *Cluster) WaitJetStream(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	urls := c.URLs()
	for i, srv := range c.servers {
		if srv == nil {
			continue
		}
		for {
			err := jetStreamAnswers(urls[i])
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("NATS server %d: JetStream not ready after %s: %w", i, timeout, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
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
