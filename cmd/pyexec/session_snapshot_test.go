package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// snapshotAPI answers the snapshot endpoints with canned bodies and
// records the requests (method, path and JSON body) it saw.
func snapshotAPI(t *testing.T) (string, func() []string) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen []string
	)
	answers := map[string]struct {
		status int
		body   string
	}{
		"POST /api/v1/sessions/ses_1/snapshot": {http.StatusCreated, `{"snapshot_id":"snap_1","bytes":3145728,"execution_count":2,
			"saved":["df"],"skipped":[{"name":"t","reason":"a thread: threads do not survive a snapshot"}]}`},
		"POST /api/v1/sessions/ses_1/fork": {http.StatusCreated, `{"session_id":"ses_2","state":"idle","forked_from":"ses_1","execution_count":2}`},
		"POST /api/v1/sessions":            {http.StatusCreated, `{"session_id":"ses_3","state":"idle","from_snapshot":"snap_1","execution_count":2}`},
		"GET /api/v1/snapshots": {http.StatusOK, `{"snapshots":[{"snapshot_id":"snap_1","session_id":"ses_1","bytes":3145728,
			"created_at":"2026-01-02T03:04:05Z","python_version":"3.12","execution_count":2,"skipped":[{"name":"t","reason":"a thread"}]}]}`},
		"DELETE /api/v1/snapshots/snap_1": {http.StatusNoContent, ""},
		"POST /api/v1/sessions/ses_1/execute": {http.StatusOK, `{"execution_id":"exe_1","status":"completed","exit_code":0,
			"stdout":"","result":"42","session_id":"ses_1","execution_count":3,"resumed":true}`},
		"DELETE /api/v1/snapshots/snap_x": {http.StatusNotFound, `{"status":404,"title":"Not Found","detail":"snapshot not found"}`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		key := r.Method + " " + r.URL.Path
		mu.Lock()
		seen = append(seen, strings.TrimSpace(key+" "+string(b)))
		mu.Unlock()
		a, ok := answers[key]
		if !ok {
			t.Errorf("unexpected request %s", key)
			a.status = http.StatusTeapot
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func TestSessionSnapshotForkAndRestoreCommands(t *testing.T) {
	cases := []struct {
		name                   string
		args                   []string
		wantCode               int
		wantStdout, wantStderr string
		wantSent               string
	}{
		{name: "snapshot prints the id and the skipped variables", args: []string{"session", "snapshot", "ses_1"},
			wantStdout: "snap_1\n", wantStderr: "skipped t: a thread: threads do not survive a snapshot\n",
			wantSent: "POST /api/v1/sessions/ses_1/snapshot"},
		{name: "snapshot -q prints only the id", args: []string{"session", "snapshot", "-q", "ses_1"},
			wantStdout: "snap_1\n", wantSent: "POST /api/v1/sessions/ses_1/snapshot"},
		{name: "fork prints the new session", args: []string{"session", "fork", "ses_1"},
			wantStdout: "ses_2\n", wantSent: "POST /api/v1/sessions/ses_1/fork"},
		{name: "create --from-snapshot restores", args: []string{"session", "create", "-q", "--from-snapshot", "snap_1"},
			wantStdout: "ses_3\n", wantSent: `POST /api/v1/sessions {"from_snapshot":"snap_1"}`},
		{name: "snapshot ls -q", args: []string{"snapshot", "ls", "-q"}, wantStdout: "snap_1\n", wantSent: "GET /api/v1/snapshots"},
		{name: "snapshot rm", args: []string{"snapshot", "rm", "snap_1"}, wantStdout: "snap_1\n", wantSent: "DELETE /api/v1/snapshots/snap_1"},
		{name: "snapshot rm of an unknown one fails with the server's message", args: []string{"snapshot", "rm", "snap_x"},
			wantCode: exitClientError, wantStderr: "snapshot not found", wantSent: "DELETE /api/v1/snapshots/snap_x"},
		{name: "exec -v says the cell resumed the session", args: []string{"session", "exec", "-v", "ses_1", "x"},
			wantStdout: "42\n", wantStderr: "pyexec: the session was hibernated; it resumed for this cell\n",
			wantSent: `POST /api/v1/sessions/ses_1/execute {"code":"x"}`},
		{name: "an empty id is refused before any request", args: []string{"session", "snapshot", ""},
			wantCode: 1, wantStderr: "the session id is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, seen := snapshotAPI(t)
			code, stdout, stderr := runCLI(append(tc.args, "--server", url)...)
			if code != tc.wantCode || stdout != tc.wantStdout || !strings.Contains(stderr, tc.wantStderr) || (tc.wantStderr == "") != (stderr == "") {
				t.Errorf("exit %d (want %d), stdout %q (want %q), stderr %q (want %q)", code, tc.wantCode, stdout, tc.wantStdout, stderr, tc.wantStderr)
			}
			sent := seen()
			if tc.wantSent == "" && len(sent) != 0 || tc.wantSent != "" && (len(sent) != 1 || sent[0] != tc.wantSent) {
				t.Errorf("sent %q, want %q", sent, tc.wantSent)
			}
		})
	}
}

func TestSnapshotLsTableAndJSON(t *testing.T) {
	url, _ := snapshotAPI(t)
	code, stdout, stderr := runCLI("snapshot", "ls", "--server", url)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "SNAPSHOT") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, want := range []string{"snap_1", "ses_1", "3.12", "3.0 MiB"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}
	code, stdout, _ = runCLI("session", "snapshot", "--json", "ses_1", "--server", url)
	var saved struct {
		SnapshotID string `json:"snapshot_id"`
		Bytes      int64  `json:"bytes"`
		Skipped    []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(stdout), &saved); code != 0 || err != nil || saved.SnapshotID != "snap_1" || saved.Bytes != 3145728 ||
		len(saved.Skipped) != 1 || saved.Skipped[0].Name != "t" {
		t.Errorf("--json: exit %d, %s (%v)", code, stdout, err)
	}
}
