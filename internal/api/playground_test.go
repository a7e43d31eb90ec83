package api

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/config"
)

// TestPlaygroundServing checks how / and its assets are served: open on a
// keyed server (the page asks for the key itself), a strict policy with a
// fresh nonce per page, and the API's JSON errors unchanged elsewhere.
func TestPlaygroundServing(t *testing.T) {
	ts := newTestServer(t, newFakeEngine(), func(c *config.Config) { c.APIKeys = []string{"ci:" + testKey} })
	nonceRE := regexp.MustCompile(`style-src 'self' 'nonce-([A-Za-z0-9_-]{22})';`)

	pageNonce := func(t *testing.T) string {
		t.Helper()
		code, hdr, body := call(t, ts, http.MethodGet, "/", "", nil, nil)
		if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
			t.Fatalf("GET /: %d %s", code, hdr.Get("Content-Type"))
		}
		csp := hdr.Get("Content-Security-Policy")
		m := nonceRE.FindStringSubmatch(csp)
		if m == nil || !strings.Contains(csp, "script-src 'self';") || !strings.Contains(csp, "default-src 'none'") {
			t.Fatalf("policy %q", csp)
		}
		if !strings.Contains(string(body), `<meta name="csp-nonce" content="`+m[1]+`">`) {
			t.Fatalf("the page does not carry its nonce %s", m[1])
		}
		return m[1]
	}
	t.Run("page has a fresh nonce each time", func(t *testing.T) {
		if a, b := pageNonce(t), pageNonce(t); a == b {
			t.Fatalf("nonce %s served twice", a)
		}
	})

	tests := []struct {
		name, method, path string
		key                bool
		wantCode           int
		wantType           string
	}{
		{"app script is open", http.MethodGet, "/playground/app.js", false, 200, "text/javascript"},
		{"editor bundle is open", http.MethodGet, "/playground/editor.js", false, 200, "text/javascript"},
		{"style is open", http.MethodGet, "/playground/style.css", false, 200, "text/css"},
		{"unknown asset", http.MethodGet, "/playground/nope.js", false, 404, ""},
		{"other paths still need a key", http.MethodGet, "/nope", false, 401, "application/json"},
		{"the API still needs a key", http.MethodGet, "/api/v1/executions", false, 401, "application/json"},
		{"unknown path is a JSON 404", http.MethodGet, "/nope", true, 404, "application/json"},
		{"post to the page", http.MethodPost, "/", true, 405, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdrs map[string]string
			if tt.key {
				hdrs = map[string]string{"X-API-Key": testKey}
			}
			code, hdr, body := call(t, ts, tt.method, tt.path, "", nil, hdrs)
			if code != tt.wantCode || !strings.HasPrefix(hdr.Get("Content-Type"), tt.wantType) {
				t.Fatalf("%s %s: %d %q %.200s", tt.method, tt.path, code, hdr.Get("Content-Type"), body)
			}
			if code == 200 && (hdr.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(hdr.Get("Content-Security-Policy"), "style-src 'self';")) {
				t.Fatalf("asset headers %v", hdr)
			}
		})
	}
}

// TestPlaygroundFrameSource: the page may frame previews only where the
// server serves them — its own origin without a preview host, the host
// (or every host of the wildcard) with one — and nothing without
// --preview.
func TestPlaygroundFrameSource(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enabled bool
		host    string
		want    string // the frame-src directive; "" none
	}{
		{"previews off", false, "", ""},
		{"same origin, sandboxed", true, "", "frame-src 'self';"},
		{"a preview host", true, "https://preview.example.com", "frame-src https://preview.example.com;"},
		{"a wildcard host", true, "https://*.preview.example.com", "frame-src https://*.preview.example.com;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			c.Preview.Enabled, c.Preview.Host = tc.enabled, tc.host
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			// Previews come with sessions; the page is served without
			// calling them.
			s, err := New(newFakeEngine(), Options{Config: c, Version: "test", Sessions: struct{ SessionEngine }{}})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			code, hdr, _ := call(t, ts, http.MethodGet, "/", "", nil, nil)
			csp := hdr.Get("Content-Security-Policy")
			if code != http.StatusOK {
				t.Fatalf("GET /: %d", code)
			}
			if tc.want == "" && strings.Contains(csp, "frame-src") || tc.want != "" && !strings.Contains(csp, tc.want) {
				t.Fatalf("policy %q, want %q", csp, tc.want)
			}
			if !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Fatalf("policy %q lets others frame the page", csp)
			}
		})
	}
}
