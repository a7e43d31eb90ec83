package api

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
)

// TestHealthHidesFleetHostsFromAnonymous: /health needs no key. On a
// server with keys it must not tell who does not present one the node's
// name (the host name by default) or the NATS server it talks to, which
// /api/v1/nodes keeps behind a key for that reason; without keys it
// shows both.
func TestHealthHidesFleetHostsFromAnonymous(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		c := config.Default()
		if keyed {
			c.APIKeys = []string{"ci:" + testKey}
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		s, err := New(newFakeEngine(), Options{Config: c, Version: "test", Isolation: "jail", Heartbeat: 20 * time.Millisecond,
			Node: "db-host-7", NATS: func() NATSHealth {
				return NATSHealth{Mode: "cluster", Connected: true, Server: "nats://10.1.2.3:4222"}
			}})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, mustRequest(t, "GET", "/health"))
		body := rec.Body.String()
		shows := strings.Contains(body, "db-host-7") || strings.Contains(body, "10.1.2.3")
		if keyed && shows {
			t.Errorf("/health without a key on a server with keys names the host or the NATS server: %s", body)
		}
		if !keyed && (!strings.Contains(body, "db-host-7") || !strings.Contains(body, "10.1.2.3")) {
			t.Errorf("/health on a server without keys lost the node or the NATS server: %s", body)
		}
		if !strings.Contains(body, `"connected":true`) {
			t.Errorf("/health lost the NATS connection state (keyed %v): %s", keyed, body)
		}
	}
}
