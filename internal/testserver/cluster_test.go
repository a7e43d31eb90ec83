package testserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"testing"
	"time"
)

// A cluster elects a meta leader, survives losing it, takes it back on its
// old ports and data, and removes the stores it made when closed.
func TestClusterLosesAndTakesBackAServer(t *testing.T) {
	c, err := StartCluster("pyexec-testserver", 3, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := len(c.URLs()); got != 3 {
		t.Fatalf("%d URLs, want 3", got)
	}
	leader, err := c.MetaLeader()
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(leader)
	if err := c.WaitJetStream(60 * time.Second); err != nil {
		t.Fatalf("the two servers left: %v", err)
	}
	if err := c.Start(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(leader); err == nil {
		t.Error("starting a running server again did not fail")
	}
	if err := c.WaitJetStream(60 * time.Second); err != nil {
		t.Fatalf("the server back on its ports: %v", err)
	}
	c.Close()
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Errorf("the stores' directory %s is still there (%v)", c.dir, err)
	}
}

// A port chosen for a server and taken by someone else before the server
// listens (CI: "NATS server 2 did not become ready" after 30 s) fails
// that start at once, and a cluster's first start takes other ports.
func TestClusterStartsOnOtherPortsWhenItsOwnAreTaken(t *testing.T) {
	c, err := NewCluster("pyexec-testserver", 3, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	taken := func(port int) {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	takenClient, takenRoute := c.clients[2], c.routes[1]
	taken(takenClient)
	taken(takenRoute)

	start := time.Now()
	if err := c.Start(2); !errors.Is(err, errNotListening) {
		t.Fatalf("starting on a taken client port: %v, want a failure to listen", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the failed start took %v; it should not wait for readiness", d)
	}
	start = time.Now()
	for i := range 3 {
		if err := c.startFresh(i); err != nil {
			t.Fatalf("server %d: %v", i, err)
		}
	}
	if err := c.WaitJetStream(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the cluster took %v to start", d)
	}
	if slices.Contains(c.clients, takenClient) || slices.Contains(c.routes, takenRoute) {
		t.Errorf("the cluster kept a taken port: clients %v, routes %v", c.clients, c.routes)
	}
}
