package api

import (
	"net/http"
	"testing"
)

// TestMalformedAcceptHeaders: Accept headers that made huma's negotiation
// panic (a 500 and a logged stack) are answered like any other request;
// well-formed ones keep their meaning.
func TestMalformedAcceptHeaders(t *testing.T) {
	ts := newTestServer(t, newFakeEngine(), nil)
	for _, accept := range []string{";M,mCz", "a;b", ";", ",,;q", "application/json;q", "text/html;x=1;q=0.5"} {
		status, _, body := call(t, ts, http.MethodGet, "/api/v1/executions?limit=-5", "", nil, map[string]string{"Accept": accept})
		if status != http.StatusBadRequest {
			t.Errorf("Accept %q: %d %s, want the usual 400 for a bad limit", accept, status, body)
		}
	}
	for in, want := range map[string]string{
		"application/json":                          "application/json",
		"text/event-stream, application/json;q=0.5": "text/event-stream,application/json;q=0.5",
		";M,mCz":           "mCz",
		"a;b, c ; q = 0.3": "a,c;q=0.3",
	} {
		if got := acceptRanges(in); got != want {
			t.Errorf("acceptRanges(%q) = %q, want %q", in, got, want)
		}
	}
}
