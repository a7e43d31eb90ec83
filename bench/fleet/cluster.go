package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// cluster is a NATS JetStream cluster of in-process servers on loopback.
type cluster struct {
	servers []*natsserver.Server
	urls    []string
	dir     string
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startCluster starts n clustered servers and waits until JetStream
// answers through each.
func startCluster(n int) (_ *cluster, err error) {
	dir, err := os.MkdirTemp("", "pyexec-fleetbench-nats-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	clientPorts, routePorts := make([]int, n), make([]int, n)
	for i := range n {
		if clientPorts[i], err = freePort(); err != nil {
			return nil, err
		}
		if routePorts[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	for i := range n {
		var routes []string
		for j, p := range routePorts {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
			}
		}
		srv, err := natsserver.NewServer(&natsserver.Options{
			ServerName: fmt.Sprintf("nats-%d", i), Host: "127.0.0.1", Port: clientPorts[i],
			JetStream: true, StoreDir: filepath.Join(dir, fmt.Sprint(i)), MaxPayload: 8 << 20, NoSigs: true, NoLog: true,
			Cluster: natsserver.ClusterOpts{Name: "pyexec-bench", Host: "127.0.0.1", Port: routePorts[i]},
			Routes:  natsserver.RoutesFromStr(strings.Join(routes, ",")),
		})
		if err != nil {
			return nil, err
		}
		go srv.Start()
		if !srv.ReadyForConnections(30 * time.Second) {
			return nil, errors.New("a NATS server did not become ready")
		}
		c.servers = append(c.servers, srv)
		c.urls = append(c.urls, fmt.Sprintf("nats://127.0.0.1:%d", clientPorts[i]))
	}
	for _, u := range c.urls {
		if err := waitJetStream(u, 60*time.Second); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func waitJetStream(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := func() error {
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
		}()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JetStream at %s not ready: %w", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *cluster) close() {
	for _, s := range c.servers {
		s.Shutdown()
		s.WaitForShutdown()
	}
	os.RemoveAll(c.dir)
}
