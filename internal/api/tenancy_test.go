package api

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pyexec/pyexec/internal/api/metrics"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// The keys of the tenancy tests: two tenants and an operator.
const (
	keyA     = "tenant-a-0123456789abcdef"
	keyB     = "tenant-b-0123456789abcdef"
	keyAdmin = "operator-0123456789abcdef"
)

// tenancyServer serves the API over a real engine with artifacts,
// sessions and workspaces, with keys a, b and the operator key ops.
func tenancyServer(t *testing.T) *httptest.Server {
	t.Helper()
	eng := enginetest.StartWithWorkspaces(t, engine.Config{Concurrency: 2, QueueSize: 4, DefaultTimeout: 60 * time.Second,
		Sessions: engine.SessionConfig{Max: 4, DefaultMemoryBytes: 64 << 20}, Preview: testPreviewConfig(t, time.Hour)},
		func(st *store.NATS, jails *sandbox.Manager) engine.Deps {
			return engine.Deps{Artifacts: st, Jails: jails}
		})
	c := config.Default()
	c.APIKeys = []string{"a:" + keyA, "b:" + keyB, "ops:" + keyAdmin}
	c.AdminKeys = []string{"ops"}
	c.Preview.Enabled = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := New(eng, Options{Config: c, Version: "test", Isolation: "jail", Workspaces: eng.WorkspaceUsage,
		Collectors: []prometheus.Collector{metrics.WorkspaceCollector(eng.WorkspaceUsage)}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// as is the header of a request made with key.
func as(key string) map[string]string { return map[string]string{"X-API-Key": key} }

// tenantResources are key a's executions, session, snapshot and workspace.
type tenantResources struct {
	done, running, session, snapshot, workspace string
}

// createTenantResources makes, as key a, a finished execution with a file,
// a running one, a session with a file and a snapshot of that session.
func createTenantResources(t *testing.T, ts *httptest.Server) tenantResources {
	t.Helper()
	js := "application/json"
	code, _, body := call(t, ts, http.MethodPost, "/api/v1/eval", js,
		[]byte(`{"code":"open('out.txt', 'w').write('secret of a')\nprint('secret of a')"}`), as(keyA))
	done := decode[ExecutionResult](t, body)
	if code != http.StatusOK || done.Status != "completed" || len(done.Files) != 1 {
		t.Fatalf("a's eval: %d %s", code, body)
	}
	tarData := makeTar(t, tar.FormatUSTAR, tarEntry{Name: "main.py", Body: "import time\nprint('working', flush=True)\ntime.sleep(60)\n"})
	ct, mp := multipartBody(t, tarData, `{}`, metaFormField)
	code, _, body = call(t, ts, http.MethodPost, "/api/v1/exec/async", ct, mp, as(keyA))
	if code != http.StatusAccepted {
		t.Fatalf("a's async: %d %s", code, body)
	}
	running := decode[map[string]string](t, body)["execution_id"]
	code, _, body = call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(`{}`), as(keyA))
	if code != http.StatusCreated {
		t.Fatalf("a's session: %d %s", code, body)
	}
	session := decode[SessionInfo](t, body).SessionID
	code, _, body = call(t, ts, http.MethodPut, "/api/v1/sessions/"+session+"/files/in.txt", "application/octet-stream", []byte("a's data"), as(keyA))
	if code != http.StatusCreated {
		t.Fatalf("a's session file: %d %s", code, body)
	}
	code, _, body = call(t, ts, http.MethodPost, "/api/v1/sessions/"+session+"/snapshot", "", nil, as(keyA))
	if code != http.StatusCreated {
		t.Fatalf("a's snapshot: %d %s", code, body)
	}
	snap := decode[SnapshotSaved](t, body).SnapshotID
	createWorkspace(t, ts, keyA, "data")
	code, _, body = call(t, ts, http.MethodPut, "/api/v1/workspaces/data/files/in.txt", "application/octet-stream", []byte("a's data"), as(keyA))
	if code != http.StatusOK {
		t.Fatalf("a's workspace file: %d %s", code, body)
	}
	return tenantResources{done: done.ExecutionID, running: running, session: session, snapshot: snap, workspace: "data"}
}

// idRoute is one route that takes an execution or session id, with a
// request to send to it.
type idRoute struct {
	method, pattern string // pattern as in the OpenAPI document (or the mux for raw routes)
	session         bool   // the id is a session's
	snapshot        bool   // the id is a snapshot's
	workspace       bool   // the route names a workspace (of key a's: ?owner=a)
	body            string
	contentType     string
	accept          string
	// mutates: run after the read-only routes, the admin's call last.
	mutates bool
	// want is the status an owner (or the admin) gets.
	want int
}

// tenancyRoutes has a case for every route that takes an id or names a
// workspace. The OpenAPI walk in TestTenancyRoutesCovered fails for a
// documented route without one, and for a workspace file route
// (workspaceFileRoutes); the session file routes are served outside the
// OpenAPI document and are listed here by hand.
var tenancyRoutes = []idRoute{
	{method: http.MethodGet, pattern: "/api/v1/executions/{id}", want: 200},
	{method: http.MethodGet, pattern: "/api/v1/executions/{id}/events", accept: ndjsonType, want: 200},
	{method: http.MethodGet, pattern: "/api/v1/executions/{id}/events", accept: "text/event-stream", want: 200},
	{method: http.MethodGet, pattern: "/api/v1/executions/{id}/files", want: 200},
	{method: http.MethodGet, pattern: "/api/v1/executions/{id}/files/{path}", want: 200},
	{method: http.MethodGet, pattern: "/api/v1/sessions/{id}", session: true, want: 200},
	{method: http.MethodGet, pattern: "/api/v1/sessions/{id}/files", session: true, want: 200},
	{method: http.MethodGet, pattern: "/api/v1/sessions/{id}/files/{path...}", session: true, want: 200},
	// Nothing listens on the port: the owner's request reaches the jail
	// and is refused there.
	{method: http.MethodGet, pattern: "/api/v1/sessions/{id}/ports/{port}/{path...}", session: true, want: 502},
	{method: http.MethodPost, pattern: "/api/v1/sessions/{id}/ports/{port}/share", session: true, mutates: true, want: 201},
	{method: http.MethodDelete, pattern: "/api/v1/sessions/{id}/ports/{port}/share", session: true, mutates: true, want: 200},
	{method: http.MethodPut, pattern: "/api/v1/sessions/{id}/files/{path...}", session: true, body: "b was here",
		contentType: "application/octet-stream", mutates: true, want: 201},
	{method: http.MethodPost, pattern: "/api/v1/sessions/{id}/execute", session: true, body: `{"code":"print('ran')"}`,
		contentType: "application/json", mutates: true, want: 200},
	{method: http.MethodPost, pattern: "/api/v1/sessions/{id}/interrupt", session: true, mutates: true, want: 200},
	{method: http.MethodPost, pattern: "/api/v1/sessions/{id}/restart", session: true, mutates: true, want: 200},
	{method: http.MethodPost, pattern: "/api/v1/sessions/{id}/snapshot", session: true, mutates: true, want: 201},
	{method: http.MethodPost, pattern: "/api/v1/sessions/{id}/fork", session: true, mutates: true, want: 201},
	{method: http.MethodDelete, pattern: "/api/v1/snapshots/{id}", snapshot: true, mutates: true, want: 204},
	{method: http.MethodGet, pattern: "/api/v1/workspaces/{name}", workspace: true, want: 200},
	{method: http.MethodGet, pattern: "/api/v1/workspaces/{name}/versions", workspace: true, want: 200},
	{method: http.MethodGet, pattern: "/api/v1/workspaces/{name}/files", workspace: true, want: 200},
	{method: http.MethodGet, pattern: "/api/v1/workspaces/{name}/files/{path...}", workspace: true, want: 200},
	{method: http.MethodGet, pattern: "/api/v1/workspaces/{name}/archive", workspace: true, want: 200},
	{method: http.MethodPut, pattern: "/api/v1/workspaces/{name}/files/{path...}", workspace: true, body: "b was here",
		contentType: "application/octet-stream", mutates: true, want: 200},
	{method: http.MethodPost, pattern: "/api/v1/workspaces/{name}/archive", workspace: true, body: tenancyTar,
		contentType: "application/x-tar", mutates: true, want: 200},
	{method: http.MethodDelete, pattern: "/api/v1/workspaces/{name}/files/{path...}", workspace: true, mutates: true, want: 200},
	{method: http.MethodPost, pattern: "/api/v1/workspaces/{name}/restore", workspace: true, body: `{"version":0}`,
		contentType: "application/json", mutates: true, want: 200},
	{method: http.MethodDelete, pattern: "/api/v1/executions/{id}", mutates: true, want: 200},
	{method: http.MethodDelete, pattern: "/api/v1/sessions/{id}", session: true, mutates: true, want: 204},
	{method: http.MethodDelete, pattern: "/api/v1/workspaces/{name}", workspace: true, mutates: true, want: 204},
}

// tenancyTar is a tar holding up.txt, for the archive upload's case.
var tenancyTar = func() string {
	var b strings.Builder
	tw := tar.NewWriter(&b)
	_ = tw.WriteHeader(&tar.Header{Name: "up.txt", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("up"))
	_ = tw.Close()
	return b.String()
}()

func (r idRoute) name() string {
	n := r.method + " " + r.pattern
	if r.accept != "" {
		n += " (" + r.accept + ")"
	}
	return n
}

// path fills in the route's parameters: execution routes name the
// finished execution (or, for a kill, the running one), file routes the
// file each holds.
func (r idRoute) path(res tenantResources) string {
	if r.workspace {
		p := strings.Replace(r.pattern, "{name}", res.workspace, 1)
		return strings.Replace(p, "{path...}", "in.txt", 1) + "?owner=a"
	}
	id := res.done
	switch {
	case r.session:
		id = res.session
	case r.snapshot:
		id = res.snapshot
	case r.method == http.MethodDelete:
		id = res.running
	}
	p := strings.Replace(r.pattern, "{id}", id, 1)
	p = strings.Replace(p, "{port}", "8000", 1)
	p = strings.Replace(p, "{path...}", "in.txt", 1)
	return strings.Replace(p, "{path}", "out.txt", 1)
}

func (r idRoute) send(t *testing.T, ts *httptest.Server, res tenantResources, key string) (int, []byte) {
	t.Helper()
	hdr := as(key)
	if r.accept != "" {
		hdr["Accept"] = r.accept
	}
	code, _, body := call(t, ts, r.method, r.path(res), r.contentType, []byte(r.body), hdr)
	return code, body
}

// TestTenancyRoutesCovered fails for a documented route with an {id}
// parameter that has no case in tenancyRoutes.
func TestTenancyRoutesCovered(t *testing.T) {
	// The document only: no route is called, so the sessions need no
	// engine behind them.
	ts := newTestServer(t, struct {
		*fakeEngine
		SessionEngine
		WorkspaceEngine
		SnapshotEngine
	}{fakeEngine: newFakeEngine()}, nil)
	_, _, body := call(t, ts, http.MethodGet, "/openapi.json", "", nil, nil)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, route := range workspaceFileRoutes {
		m, p, _ := strings.Cut(route, " ")
		if !slices.ContainsFunc(tenancyRoutes, func(r idRoute) bool { return r.method == m && r.pattern == p }) {
			t.Errorf("%s names a workspace but has no two-key case in tenancyRoutes", route)
		}
	}
	for p, ops := range doc.Paths {
		if !strings.Contains(p, "{id}") && !strings.Contains(p, "{name}") {
			continue
		}
		for m := range ops {
			m = strings.ToUpper(m)
			seen++
			if !slices.ContainsFunc(tenancyRoutes, func(r idRoute) bool { return r.method == m && r.pattern == p }) {
				t.Errorf("%s %s takes an id but has no two-key case in tenancyRoutes", m, p)
			}
		}
	}
	if seen < 16 {
		t.Fatalf("found only %d routes with an id in the OpenAPI document", seen)
	}
}

func TestTenancy(t *testing.T) {
	ts := tenancyServer(t)
	res := createTenantResources(t, ts)
	unknown := tenantResources{done: "exe_00000000-0000-7000-8000-000000000000", running: "exe_00000000-0000-7000-8000-000000000001",
		session: "ses_00000000-0000-7000-8000-000000000000", snapshot: "snap_000000000000000000000000", workspace: "nope"}

	t.Run("restoring and listing snapshots", func(t *testing.T) {
		restore := func(key, id string) (int, []byte) {
			code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions", "application/json",
				[]byte(`{"from_snapshot":"`+id+`"}`), as(key))
			return code, body
		}
		wantCode, wantBody := restore(keyB, unknown.snapshot)
		for _, key := range []string{keyB, keyAdmin} {
			if code, body := restore(key, res.snapshot); wantCode != http.StatusNotFound || code != wantCode || string(body) != string(wantBody) {
				t.Errorf("%.8s restores a's snapshot: %d %s; want what an unknown id gets: %d %s", key, code, body, wantCode, wantBody)
			}
		}
		code, body := restore(keyA, res.snapshot)
		if code != http.StatusCreated {
			t.Fatalf("a restores its snapshot: %d %s", code, body)
		}
		restored := decode[SessionInfo](t, body)
		code, body = call2(t, ts, http.MethodGet, "/api/v1/sessions/"+restored.SessionID+"/files/in.txt", keyA)
		if code != 200 || string(body) != "a's data" || restored.FromSnapshot != res.snapshot {
			t.Errorf("the restored session's file: %d %q (%+v)", code, body, restored)
		}
		if code, body := call2(t, ts, http.MethodDelete, "/api/v1/sessions/"+restored.SessionID, keyA); code != 204 {
			t.Fatalf("deleting the restored session: %d %s", code, body)
		}
		listed := func(key string) string {
			code, body := call2(t, ts, http.MethodGet, "/api/v1/snapshots", key)
			if code != 200 {
				t.Fatalf("listing snapshots: %d %s", code, body)
			}
			return string(body)
		}
		if strings.Contains(listed(keyB), res.snapshot) || !strings.Contains(listed(keyA), res.snapshot) || !strings.Contains(listed(keyAdmin), res.snapshot) {
			t.Errorf("snapshot lists: b %s, a %s, admin %s", listed(keyB), listed(keyA), listed(keyAdmin))
		}
	})

	routes := slices.Clone(tenancyRoutes)
	slices.SortStableFunc(routes, func(x, y idRoute) int {
		if x.mutates == y.mutates {
			return 0
		}
		if x.mutates {
			return 1
		}
		return -1
	})
	for _, r := range routes {
		t.Run(r.name(), func(t *testing.T) {
			wantCode, wantBody := r.send(t, ts, unknown, keyA)
			before := tenantState(t, ts, res)
			code, body := r.send(t, ts, res, keyB)
			if wantCode != http.StatusNotFound || code != wantCode || string(body) != string(wantBody) {
				t.Errorf("key b on a's resource: %d %s; want what an unknown id gets: %d %s", code, body, wantCode, wantBody)
			}
			if strings.Contains(string(body), "secret") || strings.Contains(string(body), "a's data") {
				t.Errorf("b saw a's data: %s", body)
			}
			if after := tenantState(t, ts, res); after != before {
				t.Fatalf("b's request changed a's work: %s, then %s", before, after)
			}
			code, body = r.send(t, ts, res, keyAdmin)
			if code != r.want {
				t.Errorf("admin: %d %s, want %d", code, body, r.want)
			}
		})
	}

	t.Run("after the admin's kill and delete", func(t *testing.T) {
		code, body := call2(t, ts, http.MethodGet, "/api/v1/executions/"+res.running, keyA)
		if code != 200 || decode[ExecutionResult](t, body).Status != "killed" {
			t.Errorf("a's running execution: %d %s, want killed by the admin", code, body)
		}
		if code, body := call2(t, ts, http.MethodGet, "/api/v1/sessions/"+res.session, keyA); code != 404 {
			t.Errorf("a's session: %d %s, want deleted by the admin", code, body)
		}
	})

	t.Run("listing", func(t *testing.T) {
		listed := func(key string) []string {
			code, body := call2(t, ts, http.MethodGet, "/api/v1/executions?limit=100", key)
			if code != 200 {
				t.Fatalf("list: %d %s", code, body)
			}
			var ids []string
			for _, x := range decode[ExecutionList](t, body).Executions {
				ids = append(ids, x.ExecutionID)
			}
			return ids
		}
		if got := listed(keyB); slices.Contains(got, res.done) || slices.Contains(got, res.running) {
			t.Errorf("b lists a's executions: %v", got)
		}
		for _, key := range []string{keyA, keyAdmin} {
			if got := listed(key); !slices.Contains(got, res.done) || !slices.Contains(got, res.running) {
				t.Errorf("%.8s lists %v, want a's executions", key, got)
			}
		}
		code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions", "application/json", []byte(`{}`), as(keyA))
		if code != http.StatusCreated {
			t.Fatalf("session: %d %s", code, body)
		}
		sid := decode[SessionInfo](t, body).SessionID
		sessions := func(key string) string {
			_, body := call2(t, ts, http.MethodGet, "/api/v1/sessions", key)
			return string(body)
		}
		if strings.Contains(sessions(keyB), sid) || !strings.Contains(sessions(keyA), sid) || !strings.Contains(sessions(keyAdmin), sid) {
			t.Errorf("session lists: b %s, a %s, admin %s", sessions(keyB), sessions(keyA), sessions(keyAdmin))
		}
		createWorkspace(t, ts, keyA, "listed")
		workspaces := func(key, query string) string {
			_, body := call2(t, ts, http.MethodGet, "/api/v1/workspaces"+query, key)
			return string(body)
		}
		if strings.Contains(workspaces(keyB, ""), "listed") || !strings.Contains(workspaces(keyA, ""), "listed") ||
			!strings.Contains(workspaces(keyAdmin, "?all=true"), "listed") {
			t.Errorf("workspace lists: b %s, a %s, admin %s", workspaces(keyB, ""), workspaces(keyA, ""), workspaces(keyAdmin, "?all=true"))
		}
		// Every key's list is an operator's: another key is told so
		// rather than quietly given its own.
		if code, body := call2(t, ts, http.MethodGet, "/api/v1/workspaces?all=true", keyB); code != http.StatusBadRequest ||
			strings.Contains(string(body), "listed") || !strings.Contains(string(body), "needs an operator key") {
			t.Errorf("all=true from a key that is no operator's: %d %s", code, body)
		}
	})
}

// tenantState sums up a's work as a sees it: the running execution's
// status, the session's cell count and its file, its snapshots.
func tenantState(t *testing.T, ts *httptest.Server, res tenantResources) string {
	t.Helper()
	_, exe := call2(t, ts, http.MethodGet, "/api/v1/executions/"+res.running, keyA)
	code, ses := call2(t, ts, http.MethodGet, "/api/v1/sessions/"+res.session, keyA)
	_, file := call2(t, ts, http.MethodGet, "/api/v1/sessions/"+res.session+"/files/in.txt", keyA)
	_, snaps := call2(t, ts, http.MethodGet, "/api/v1/snapshots", keyA)
	var ids []string
	for _, s := range decode[SnapshotList](t, snaps).Snapshots {
		ids = append(ids, s.SnapshotID)
	}
	_, ws := call2(t, ts, http.MethodGet, "/api/v1/workspaces/"+res.workspace, keyA)
	return fmt.Sprintf("execution %s, session %d %d, file %q, snapshots %v, workspace %s", decode[ExecutionResult](t, exe).Status, code,
		decode[SessionInfo](t, ses).ExecutionCount, file, ids, ws)
}

// call2 is a GET-like call with a key and no body.
func call2(t *testing.T, ts *httptest.Server, method, path, key string) (int, []byte) {
	t.Helper()
	code, _, body := call(t, ts, method, path, "", nil, as(key))
	return code, body
}
