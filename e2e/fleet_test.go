package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
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

func getHealth(t *testing.T, url string) health {
	t.Helper()
	resp, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestFleetHealth starts three nodes on a three-server NATS cluster: each
// reports its name and its connection to the cluster.
func TestFleetHealth(t *testing.T) {
	needRoot(t)
	urls := startNATSCluster(t, 3)
	fleet := startFleet(t, urls, 3)
	for i, s := range fleet {
		h := getHealth(t, s.url)
		if h.Node != nodeName(i) || h.NATS.Mode != "cluster" || !h.NATS.Connected || h.NATS.Server == "" {
			t.Errorf("node %d: /health says node %q, nats %+v; want node %q connected to the cluster", i, h.Node, h.NATS, nodeName(i))
		}
	}
}
