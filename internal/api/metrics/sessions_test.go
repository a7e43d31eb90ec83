package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pyexec/pyexec/internal/engine"
)

// TestSessionHibernationOutcomes: a hibernation whose session's
// interpreter ended is an outcome of its own, apart from the failed saves.
func TestSessionHibernationOutcomes(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(SessionCollector(func() engine.SessionStats {
		return engine.SessionStats{Hibernated: 5, HibernateFailed: 2, HibernateEnded: 1}
	}))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "pyexec_session_hibernations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"saved": 5, "failed": 2, "ended": 1}
	if len(got) != len(want) {
		t.Fatalf("pyexec_session_hibernations_total: %v, want %v", got, want)
	}
	for outcome, n := range want {
		if got[outcome] != n {
			t.Errorf("pyexec_session_hibernations_total{outcome=%q} = %v, want %v", outcome, got[outcome], n)
		}
	}
}
