package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestIDsThatCannotExistAreUnknown: an id that is not of the form the
// server gives out (a space, "*", ">", a dot, braces) is answered on every
// route exactly as an unknown id is — 404 and the same body — and never
// reaches the store, where it would not be a valid key or subject.
func TestIDsThatCannotExistAreUnknown(t *testing.T) {
	ts := newRealServer(t)
	bad := []string{"a%20b", "a*b", "a%3E", "a>", "*", "%3E", "exe_..", "exe_%7B00000000-0000-4000-8000-000000000001%7D",
		"exe_00000000000040008000000000000001", "exe_00000000-0000-4000-8000-00000000000G", strings.Repeat("x", 300)}
	routes := []struct {
		method, path, unknown string
		body                  string
	}{
		{http.MethodGet, "/api/v1/executions/%s", "exe_00000000-0000-4000-8000-000000000099", ""},
		{http.MethodDelete, "/api/v1/executions/%s", "exe_00000000-0000-4000-8000-000000000099", ""},
		{http.MethodGet, "/api/v1/executions/%s/events", "exe_00000000-0000-4000-8000-000000000099", ""},
		{http.MethodGet, "/api/v1/executions/%s/files", "exe_00000000-0000-4000-8000-000000000099", ""},
		{http.MethodGet, "/api/v1/executions/%s/files/out.txt", "exe_00000000-0000-4000-8000-000000000099", ""},
		{http.MethodGet, "/api/v1/sessions/%s", "ses_00000000-0000-4000-8000-000000000099", ""},
		{http.MethodDelete, "/api/v1/sessions/%s", "ses_00000000-0000-4000-8000-000000000099", ""},
		{http.MethodPost, "/api/v1/sessions/%s/execute", "ses_00000000-0000-4000-8000-000000000099", `{"code":"1"}`},
		{http.MethodPost, "/api/v1/sessions/%s/interrupt", "ses_00000000-0000-4000-8000-000000000099", ""},
		{http.MethodPost, "/api/v1/sessions/%s/restart", "ses_00000000-0000-4000-8000-000000000099", ""},
		{http.MethodGet, "/api/v1/sessions/%s/files", "ses_00000000-0000-4000-8000-000000000099", ""},
		{http.MethodGet, "/api/v1/sessions/%s/files/a.txt", "ses_00000000-0000-4000-8000-000000000099", ""},
		{http.MethodPut, "/api/v1/sessions/%s/files/a.txt", "ses_00000000-0000-4000-8000-000000000099", "data"},
	}
	for _, r := range routes {
		ct := ""
		if strings.HasPrefix(r.body, "{") {
			ct = "application/json"
		}
		wantCode, _, wantBody := call(t, ts, r.method, strings.Replace(r.path, "%s", r.unknown, 1), ct, []byte(r.body), nil)
		if wantCode != http.StatusNotFound {
			t.Fatalf("%s %s with an unknown id: %d %s, want 404", r.method, r.path, wantCode, wantBody)
		}
		for _, id := range bad {
			t.Run(r.method+" "+r.path+" "+id, func(t *testing.T) {
				code, _, body := call(t, ts, r.method, strings.Replace(r.path, "%s", id, 1), ct, []byte(r.body), nil)
				if code != wantCode || string(body) != string(wantBody) {
					t.Errorf("got %d %s, want %d %s", code, body, wantCode, wantBody)
				}
			})
		}
	}
}
