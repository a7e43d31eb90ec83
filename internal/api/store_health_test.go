package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pyexec/pyexec/internal/api/metrics"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
)

func TestHealthAndMetricsReportTheStore(t *testing.T) {
	tests := []struct {
		name    string
		stats   engine.StoreStats
		metrics []string
	}{
		{"ok", engine.StoreStats{UsedBytes: 10 << 20, MaxBytes: 100 << 20, State: engine.StoreOK},
			[]string{"pyexec_store_bytes 1.048576e+07", `pyexec_store_state{state="ok"} 1`}},
		{"near the limit", engine.StoreStats{UsedBytes: 95 << 20, MaxBytes: 100 << 20, Evictions: 7, State: engine.StoreNearLimit},
			[]string{"pyexec_store_max_bytes 1.048576e+08", "pyexec_store_evictions_total 7", `pyexec_store_state{state="near_limit"} 1`, `pyexec_store_state{state="ok"} 0`}},
		{"full", engine.StoreStats{UsedBytes: 120 << 20, MaxBytes: 100 << 20, Evictions: 40, State: engine.StoreFull},
			[]string{`pyexec_store_state{state="full"} 1`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stats := func() engine.StoreStats { return tt.stats }
			s, err := New(newFakeEngine(), Options{Config: config.Default(), Store: stats,
				Collectors: []prometheus.Collector{metrics.StoreCollector(stats)}})
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			s.Handler().ServeHTTP(rec, mustRequest(t, http.MethodGet, "/health"))
			var h struct {
				Status string      `json:"status"`
				Store  storeHealth `json:"store"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil || rec.Code != 200 {
				t.Fatalf("health = %d %s", rec.Code, rec.Body)
			}
			want := storeHealth{State: tt.stats.State, UsedBytes: tt.stats.UsedBytes, MaxBytes: tt.stats.MaxBytes, Evictions: tt.stats.Evictions}
			if h.Status != "ok" || h.Store != want {
				t.Errorf("health = %s, want status ok and store %+v", rec.Body, want)
			}
			rec = newRecorder()
			s.Handler().ServeHTTP(rec, mustRequest(t, http.MethodGet, "/metrics"))
			for _, m := range tt.metrics {
				if !strings.Contains(rec.Body.String(), m+"\n") {
					t.Errorf("metrics lack %q", m)
				}
			}
		})
	}
}
