package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/preview"
)

// closedWithin says whether the server closes w within d: a message sent
// then gets no echo.
func closedWithin(w ws, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		_ = w.SetDeadline(time.Now().Add(time.Second))
		if _, err := w.say("still?"); err != nil {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// TestPreviewURLConnsEndWithIt: the holders of a preview URL cannot take
// the owner's connections, and what they opened (WebSockets) is closed
// when the URL is revoked or its session ends, freeing their connections.
func TestPreviewURLConnsEndWithIt(t *testing.T) {
	st := startPreviewStackWith(t, time.Hour, 2)
	ports := "/api/v1/sessions/" + st.session + "/ports/"
	addr := st.api.Listener.Addr().String()
	share := func() string {
		t.Helper()
		code, _, body := call(t, st.api, http.MethodPost, ports+"8000/share", "", nil, as(keyA))
		if code != http.StatusCreated {
			t.Fatalf("share: %d %s", code, body)
		}
		return decode[PreviewShare](t, body).URL
	}
	url := share()
	held := []ws{wsOpen(t, addr, "", url+"ws", nil), wsOpen(t, addr, "", url+"ws", nil)}
	for i, w := range held {
		if got, err := w.say("hi"); got != "echo:hi" {
			t.Fatalf("WebSocket %d: %q %v", i, got, err)
		}
	}
	if code, hdr, body := get(t, st.api, "", url+"headers", nil); code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
		t.Errorf("a third connection through URLs: %d %s, want 429", code, body)
	}
	if code, _, body := get(t, st.api, "", ports+"8000/headers", as(keyA)); code != http.StatusOK {
		t.Errorf("the owner, with the URLs' connections taken: %d %s", code, body)
	}

	code, _, body := call(t, st.api, http.MethodDelete, ports+"8000/share", "", nil, as(keyA))
	if code != http.StatusOK || decode[PreviewRevoked](t, body).Revoked != 1 {
		t.Fatalf("revoke: %d %s", code, body)
	}
	for i, w := range held {
		if !closedWithin(w, 5*time.Second) {
			t.Errorf("WebSocket %d through the revoked URL still echoes", i)
		}
	}
	url = share()
	if code, _, body := get(t, st.api, "", url+"headers", nil); code != http.StatusOK {
		t.Errorf("a new URL once the revoked one's connections closed: %d %s", code, body)
	}

	w := wsOpen(t, addr, "", url+"ws", nil)
	if code, _, body := call(t, st.api, http.MethodDelete, "/api/v1/sessions/"+st.session, "", nil, as(keyA)); code >= 300 {
		t.Fatalf("ending the session: %d %s", code, body)
	}
	if !closedWithin(w, 5*time.Second) {
		t.Error("a WebSocket through a URL outlived its session")
	}
}

// TestPreviewURLCap: a port holds preview.MaxSharesPerPort live URLs,
// then 429 until some are revoked.
func TestPreviewURLCap(t *testing.T) {
	st := startPreviewStack(t, time.Hour)
	share := "/api/v1/sessions/" + st.session + "/ports/8000/share"
	for i := range preview.MaxSharesPerPort {
		if code, _, body := call(t, st.api, http.MethodPost, share, "", nil, as(keyA)); code != http.StatusCreated {
			t.Fatalf("URL %d: %d %s", i, code, body)
		}
	}
	code, hdr, body := call(t, st.api, http.MethodPost, share, "", nil, as(keyA))
	if code != http.StatusTooManyRequests || !strings.Contains(string(body), "too many preview URLs") || hdr.Get("Retry-After") != "" {
		t.Errorf("URL %d: %d %v %s, want 429 without Retry-After", preview.MaxSharesPerPort+1, code, hdr, body)
	}
	if code, _, body := call(t, st.api, http.MethodDelete, share, "", nil, as(keyA)); code != http.StatusOK {
		t.Fatalf("revoke: %d %s", code, body)
	}
	if code, _, body := call(t, st.api, http.MethodPost, share, "", nil, as(keyA)); code != http.StatusCreated {
		t.Errorf("after a revoke: %d %s", code, body)
	}
}
