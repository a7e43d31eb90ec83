package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/preview"
)

// remoteOnly is the engine of a node that holds no session and keeps no
// preview URL: every preview is another node's.
type remoteOnly struct {
	*fakeEngine
	SessionEngine // never called: the preview routes only need it present
}

func (remoteOnly) DialSessionPort(context.Context, string, engine.Caller, int, engine.Admit) (net.Conn, error) {
	return nil, engine.ErrSessionNotFound
}

func (remoteOnly) ShareSessionPort(context.Context, string, engine.Caller, int) (engine.PortShare, error) {
	return engine.PortShare{}, engine.ErrSessionNotFound
}

func (remoteOnly) RevokeSessionPort(context.Context, string, engine.Caller, int) (int, error) {
	return 0, engine.ErrSessionNotFound
}

func (remoteOnly) DialShared(context.Context, string, engine.Admit) (net.Conn, preview.Share, error) {
	return nil, preview.Share{}, fmt.Errorf("%w: %w", engine.ErrShareInvalid, preview.ErrUnknownShare)
}

// fakeFleet names the holder of session "ses_there" (key a's) and of
// the preview URLs with issuer tag sharedTag: the URL holder; gone says
// that holder's node left.
type fakeFleet struct {
	holder, sharedTag string
	gone              bool
}

func (f fakeFleet) PreviewHolder(_ context.Context, id string, c engine.Caller) (string, error) {
	if id != "ses_there" || c.Name != "a" {
		return "", fmt.Errorf("%w: %s", engine.ErrSessionNotFound, id)
	}
	return f.holder, nil
}

func (f fakeFleet) PreviewUnreachable(context.Context, string, engine.Caller) error {
	if f.gone {
		return fmt.Errorf("%w: session ses_there ended: node_lost", engine.ErrSessionEnded)
	}
	return nil
}

func (f fakeFleet) ShareHolder(_ context.Context, tag string) (string, error) {
	if tag == f.sharedTag {
		return f.holder, nil
	}
	return "", nil
}

func (fakeFleet) ShareSessionPort(context.Context, string, engine.Caller, int) (engine.PortShare, error) {
	return engine.PortShare{}, engine.ErrSessionNotFound
}

func (fakeFleet) RevokeSessionPort(context.Context, string, engine.Caller, int) (int, error) {
	return 0, engine.ErrSessionNotFound
}

// seen is what the holding node got of a relayed request.
type seen struct {
	URI, Host string
	Header    http.Header
}

// startHolder is the node holding the session: it records each request
// and answers 200 "from the holder".
func startHolder(t *testing.T) (*httptest.Server, func() []seen) {
	t.Helper()
	var mu sync.Mutex
	var got []seen
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{URI: r.RequestURI, Host: r.Host, Header: r.Header.Clone()})
		mu.Unlock()
		_, _ = w.Write([]byte("from the holder"))
	}))
	t.Cleanup(ts.Close)
	return ts, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), got...)
	}
}

// relayNode serves the API of a node with fleet f and preview host host
// (--preview-idle-timeout 1s: a holder's answer must start within 6 s).
func relayNode(t *testing.T, f PreviewFleet, host string) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(relayAPI(t, f, host))
	t.Cleanup(ts.Close)
	return ts
}

func relayAPI(t *testing.T, f PreviewFleet, host string) http.Handler {
	t.Helper()
	c := config.Default()
	c.APIKeys = []string{"a:" + keyA, "b:" + keyB}
	c.Preview.Enabled, c.Preview.Host, c.Preview.IdleTimeout = true, host, time.Second
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := New(remoteOnly{fakeEngine: newFakeEngine()}, Options{Config: c, Version: "test", Isolation: "jail", PreviewFleet: f})
	if err != nil {
		t.Fatal(err)
	}
	return s.Handler()
}

// TestPreviewRelay: a node that does not hold a preview's session sends
// the request, path, query, Host and key as they came, to the URL the
// fleet names for the holder, marked as relayed and with nothing added
// about the viewer; it never relays a request relayed already, nor one
// of key b, nor one whose token no node keeps; an unreachable holder is
// 502 with the reason, a holder that left 410.
func TestPreviewRelay(t *testing.T) {
	holder, requests := startHolder(t)
	const token = "mfrggzdfmztwq2lknnwg23tpobyxe43uov3ho6dzpiyteni2"
	tag, ok := preview.Issuer(token)
	if !ok {
		t.Fatal("the test's token is no token")
	}
	node := relayNode(t, fakeFleet{holder: holder.URL, sharedTag: tag}, "")
	path := "/api/v1/sessions/ses_there/ports/8000/a%2Fb/page?x=1&y=%20"

	code, _, body := get(t, node, "viewer.example:8080", path, map[string]string{"X-API-Key": keyA, "X-Forwarded-For": "203.0.113.9"})
	if code != http.StatusOK || string(body) != "from the holder" {
		t.Fatalf("the owner's preview: %d %s", code, body)
	}
	got := requests()
	if len(got) != 1 {
		t.Fatalf("the holder got %d requests, want 1", len(got))
	}
	r := got[0]
	if r.URI != path || r.Host != "viewer.example:8080" || r.Header.Get("X-Api-Key") != keyA || r.Header.Get(relayedHeader) != "http" {
		t.Errorf("the holder got %s, Host %s, headers %v; want it as sent, marked relayed from http", r.URI, r.Host, r.Header)
	}
	for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"} {
		if v := r.Header.Get(h); v != "" {
			t.Errorf("the relay told the holder %s: %s", h, v)
		}
	}

	if code, _, body := get(t, node, "", "/preview/"+token+"/app.js", nil); code != http.StatusOK || string(body) != "from the holder" {
		t.Errorf("the preview URL: %d %s", code, body)
	}
	if got := requests(); len(got) != 2 || got[1].URI != "/preview/"+token+"/app.js" || got[1].Header.Get("X-Api-Key") != "" {
		t.Errorf("the holder got %+v for the preview URL", got[len(got)-1])
	}

	// Answered here, never relayed: a request relayed already, another
	// key's, a token no node keeps.
	code, _, body = get(t, node, "", path, map[string]string{"X-API-Key": keyA, relayedHeader: "1"})
	if code != http.StatusNotFound {
		t.Errorf("a relayed request: %d %s, want this node's 404", code, body)
	}
	code, _, body = get(t, node, "", path, as(keyB))
	if code != http.StatusNotFound || !strings.Contains(string(body), "session not found") {
		t.Errorf("key b: %d %s, want 404", code, body)
	}
	other := strings.Repeat("a", len(token))
	code, _, body = get(t, node, "", "/preview/"+other+"/", nil)
	if code != http.StatusForbidden {
		t.Errorf("a token no node keeps: %d %s, want 403", code, body)
	}
	if n := len(requests()); n != 2 {
		t.Errorf("the holder got %d requests, want still 2", n)
	}

	// The holder's URL answers nothing.
	closed := holder.Listener.Addr().String()
	holder.Close()
	code, _, body = get(t, node, "", path, as(keyA))
	var e struct{ Error string }
	_ = json.Unmarshal(body, &e)
	if code != http.StatusBadGateway || !strings.Contains(e.Error, "cannot reach the node holding this session ("+closed+")") {
		t.Errorf("an unreachable holder: %d %s, want 502 naming it", code, body)
	}
	left := relayNode(t, fakeFleet{holder: "http://" + closed, gone: true}, "")
	if code, _, body := get(t, left, "", path, as(keyA)); code != http.StatusGone || !strings.Contains(string(body), "node_lost") {
		t.Errorf("a holder that left: %d %s, want 410", code, body)
	}
}

// TestPreviewRelayKeepsPreviewHost: on a preview host the relayed request
// keeps its Host, by which the holder tells the preview host (and a
// wildcard's label) apart from the API's.
func TestPreviewRelayKeepsPreviewHost(t *testing.T) {
	holder, requests := startHolder(t)
	const token = "mfrggzdfmztwq2lknnwg23tpobyxe43uov3ho6dzpiyteni2"
	tag, _ := preview.Issuer(token)
	node := relayNode(t, fakeFleet{holder: holder.URL, sharedTag: tag}, "http://*."+previewHost)
	host := "lbl." + previewHost
	if code, _, body := get(t, node, host, "/preview/"+token+"/", nil); code != http.StatusOK {
		t.Fatalf("the preview URL on its host: %d %s", code, body)
	}
	if got := requests(); len(got) != 1 || got[0].Host != host {
		t.Errorf("the holder got %+v, want Host %s", got, host)
	}
}
