package testserver

import (
	"os"
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
