package api

import (
	"net/http"
	"regexp"
	"testing"
)

func TestExecutions(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		path     string
		wantCode int
	}{
		{"get completed", http.MethodGet, "/api/v1/executions/" + idCompleted, 200},
		{"get failed by timeout", http.MethodGet, "/api/v1/executions/" + idFailed, 200},
		{"get running", http.MethodGet, "/api/v1/executions/" + idRunning, 200},
		{"get with warnings and lint", http.MethodGet, "/api/v1/executions/" + idLinted, 200},
		{"get unknown", http.MethodGet, "/api/v1/executions/exe_nope", 404},
		{"kill running", http.MethodDelete, "/api/v1/executions/" + idRunning, 200},
		{"kill finished reports its status", http.MethodDelete, "/api/v1/executions/" + idCompleted, 200},
		{"kill unknown", http.MethodDelete, "/api/v1/executions/exe_nope", 404},
		{"list all", http.MethodGet, "/api/v1/executions", 200},
		{"list by status", http.MethodGet, "/api/v1/executions?status=failed", 200},
		{"list first page", http.MethodGet, "/api/v1/executions?limit=2", 200},
		{"list next page", http.MethodGet, "/api/v1/executions?limit=2&cursor=2", 200},
		{"list bad status", http.MethodGet, "/api/v1/executions?status=exploded", 400},
		{"list bad limit", http.MethodGet, "/api/v1/executions?limit=zero", 400},
		{"list limit too large", http.MethodGet, "/api/v1/executions?limit=1000", 400},
		{"list bad cursor", http.MethodGet, "/api/v1/executions?cursor=zzz", 400},
		{"unknown endpoint", http.MethodGet, "/api/v1/nothing", 404},
	}
	ts := newTestServer(t, newFakeEngine(), nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := call(t, ts, tt.method, tt.path, "", nil, nil)
			if code != tt.wantCode {
				t.Errorf("status = %d, want %d: %s", code, tt.wantCode, body)
			}
			checkGolden(t, goldenName(t), code, hdr, body)
		})
	}
}

// TestTimestampsHaveMicroseconds guards Python ≤ 3.10 clients, whose
// datetime.fromisoformat rejects more than 6 fractional digits.
func TestTimestampsHaveMicroseconds(t *testing.T) {
	ts := newTestServer(t, newFakeEngine(), nil)
	_, _, body := call(t, ts, http.MethodGet, "/api/v1/executions/"+idCompleted, "", nil, nil)
	stamps := regexp.MustCompile(`"(started_at|finished_at|created_at)":"([^"]+)"`).FindAllStringSubmatch(string(body), -1)
	if len(stamps) != 3 {
		t.Fatalf("want 3 timestamps in %s", body)
	}
	python := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)$`)
	for _, m := range stamps {
		if !python.MatchString(m[2]) {
			t.Errorf("%s = %q has more than 6 fractional digits or is not RFC 3339", m[1], m[2])
		}
	}
}
