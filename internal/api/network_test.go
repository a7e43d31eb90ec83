package api

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/api/metrics"
	"github.com/pyexec/pyexec/internal/engine"
)

// TestNetworkEventsOnTheWire: an execution's network events reach its
// result and /metrics (by proto, verdict and reason, never by host, nor
// by secret name).
func TestNetworkEventsOnTheWire(t *testing.T) {
	x := &engine.Execution{ID: "exe_1", Status: engine.StatusFailed, Reason: engine.ReasonNetworkLimit, NetworkEvents: []engine.NetworkEvent{
		{Proto: "tcp", Host: "pypi.org", Addr: "151.101.0.223", Port: 443, Verdict: "allow", BytesOut: 10, BytesIn: 20},
		{Proto: "tcp", Host: "169.254.169.254", Port: 80, Verdict: "deny", Reason: "denied_range"},
		{Proto: "http", Host: "api.github.com", Port: 443, Verdict: "allow", Secret: "GITHUB_TOKEN", Method: "GET", Path: "/user", Status: 200},
		{Proto: "http", Host: "api.github.com", Port: 443, Verdict: "deny", Reason: "placeholder_in_body", Secret: "GITHUB_TOKEN", Method: "POST", Path: "/x"},
	}}
	r := newResult(x)
	want := NetworkEvent{Proto: "tcp", Host: "pypi.org", Addr: "151.101.0.223", Port: 443, Verdict: "allow", BytesOut: 10, BytesIn: 20}
	injected := NetworkEvent{Proto: "http", Host: "api.github.com", Port: 443, Verdict: "allow", Secret: "GITHUB_TOKEN", Method: "GET", Path: "/user", Status: 200}
	if len(r.NetworkEvents) != 4 || r.NetworkEvents[0] != want || r.NetworkEvents[1].Reason != "denied_range" || r.NetworkEvents[2] != injected {
		t.Errorf("network events %+v", r.NetworkEvents)
	}
	m := metrics.New(func() engine.Stats { return engine.Stats{} })
	m.ObserveExecution(x)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range []string{
		`pyexec_network_attempts_total{proto="tcp",reason="denied_range",verdict="deny"} 1`,
		`pyexec_network_attempts_total{proto="tcp",reason="none",verdict="allow"} 1`,
		`pyexec_secret_events_total{outcome="injected"} 1`,
		`pyexec_secret_events_total{outcome="placeholder_in_body"} 1`,
	} {
		if !strings.Contains(rec.Body.String(), line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	// /metrics is for any key: no secret's name is in it.
	if strings.Contains(rec.Body.String(), "GITHUB_TOKEN") {
		t.Errorf("/metrics names a secret:\n%s", rec.Body.String())
	}
}
