package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
)

// fleetEngine is the fake engine of a server that knows its fleet.
type fleetEngine struct {
	*fakeEngine
	nodes []engine.NodeInfo
}

func (f fleetEngine) Nodes() []engine.NodeInfo { return f.nodes }

func TestNodes(t *testing.T) {
	at := time.Date(2026, 11, 25, 14, 0, 0, 123456789, time.UTC)
	warm := 3
	eng := fleetEngine{fakeEngine: newFakeEngine(), nodes: []engine.NodeInfo{
		{Name: "a", Instance: "8d1c1f0e-5f55-4a43-9d51-0e0b8f6c1a01", Version: "v1.2.3", StartedAt: at, HeartbeatAt: at.Add(time.Minute),
			Capacity: 4, Running: 2, Queued: 1, QueueSize: 100, Sessions: 1, SessionCapacity: 32, WarmJails: &warm, CPUs: 8, Load1: 1.5},
		{Name: "b", Instance: "2b6a0f43-7c1e-4f0e-8a5e-3f4b1c2d9e77", StartedAt: at, HeartbeatAt: at.Add(time.Minute), Draining: true,
			Capacity: 2, QueueSize: 8, SessionCapacity: 32, CPUs: 2},
	}}
	ts := newTestServer(t, eng, func(c *config.Config) { c.APIKeys = []string{"ci:" + testKey} })
	key := map[string]string{"Authorization": "Bearer " + testKey}

	t.Run("needs a key", func(t *testing.T) {
		code, hdr, body := call(t, ts, http.MethodGet, "/api/v1/nodes", "", nil, nil)
		if code != http.StatusUnauthorized {
			t.Fatalf("status = %d, want 401: %s", code, body)
		}
		checkGolden(t, goldenName(t), code, hdr, body)
	})
	t.Run("list", func(t *testing.T) {
		code, hdr, body := call(t, ts, http.MethodGet, "/api/v1/nodes", "", nil, key)
		if code != http.StatusOK {
			t.Fatalf("status = %d: %s", code, body)
		}
		checkGolden(t, goldenName(t), code, hdr, body)
	})
	t.Run("documented", func(t *testing.T) {
		_, _, spec := call(t, ts, http.MethodGet, "/openapi.json", "", nil, nil)
		if !strings.Contains(string(spec), `"/api/v1/nodes"`) || !strings.Contains(string(spec), `"list-nodes"`) {
			t.Error("the OpenAPI document does not describe GET /api/v1/nodes")
		}
	})
	t.Run("absent without a fleet", func(t *testing.T) {
		plain := newTestServer(t, newFakeEngine(), nil)
		if code, _, body := call(t, plain, http.MethodGet, "/api/v1/nodes", "", nil, nil); code != http.StatusNotFound {
			t.Errorf("status = %d, want 404 on an engine that knows no nodes: %s", code, body)
		}
	})
}
