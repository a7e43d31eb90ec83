package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"
)

// TestSnapshotCallsAndTheirAnswers: each snapshot call sends the request
// the API documents and decodes every field of its answer.
func TestSnapshotCallsAndTheirAnswers(t *testing.T) {
	ctx := context.Background()
	skipped := []SkippedVariable{{Name: "t", Reason: "a thread: threads do not survive a snapshot"}}

	srv, seen := fakeServer(t, http.StatusCreated, `{"snapshot_id":"snap_1","bytes":2048,"execution_count":3,"saved":["df","f"],
		"skipped":[{"name":"t","reason":"a thread: threads do not survive a snapshot"}]}`, nil)
	saved, err := New(srv.URL).Snapshot(ctx, "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	want := &SnapshotSaved{SnapshotID: "snap_1", Bytes: 2048, ExecutionCount: 3, Saved: []string{"df", "f"}, Skipped: skipped}
	if !reflect.DeepEqual(saved, want) {
		t.Errorf("snapshot %+v, want %+v", saved, want)
	}
	if r := (*seen)[0]; r.method != http.MethodPost || r.path != "/api/v1/sessions/ses_1/snapshot" {
		t.Errorf("snapshot sent %s %s", r.method, r.path)
	}

	srv, seen = fakeServer(t, http.StatusCreated, `{"session_id":"ses_2","state":"idle","forked_from":"ses_1","execution_count":3,
		"skipped":[{"name":"t","reason":"a thread: threads do not survive a snapshot"}]}`, nil)
	child, err := New(srv.URL).Fork(ctx, "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	if child.SessionID != "ses_2" || child.ForkedFrom != "ses_1" || child.ExecutionCount != 3 || !reflect.DeepEqual(child.Skipped, skipped) {
		t.Errorf("fork %+v", child)
	}
	if r := (*seen)[0]; r.method != http.MethodPost || r.path != "/api/v1/sessions/ses_1/fork" {
		t.Errorf("fork sent %s %s", r.method, r.path)
	}

	srv, seen = fakeServer(t, http.StatusCreated, `{"session_id":"ses_3","state":"idle","from_snapshot":"snap_1","execution_count":3}`, nil)
	restored, err := New(srv.URL).CreateSession(ctx, &SessionRequest{FromSnapshot: "snap_1"})
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal((*seen)[0].body, &body); err != nil || !reflect.DeepEqual(body, map[string]any{"from_snapshot": "snap_1"}) {
		t.Errorf("restore sent %s (%v)", (*seen)[0].body, err)
	}
	if restored.FromSnapshot != "snap_1" || restored.ExecutionCount != 3 {
		t.Errorf("restore %+v", restored)
	}

	srv, seen = fakeServer(t, http.StatusOK, `{"snapshots":[{"snapshot_id":"snap_1","session_id":"ses_1","bytes":2048,
		"created_at":"2026-01-02T03:04:05Z","python_version":"3.12","execution_count":3,"skipped":[]}]}`, nil)
	list, err := New(srv.URL).ListSnapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantList := []SnapshotInfo{{SnapshotID: "snap_1", SessionID: "ses_1", Bytes: 2048, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		PythonVersion: "3.12", ExecutionCount: 3, Skipped: []SkippedVariable{}}}
	if !reflect.DeepEqual(list, wantList) || (*seen)[0].method != http.MethodGet || (*seen)[0].path != "/api/v1/snapshots" {
		t.Errorf("list %+v from %s %s", list, (*seen)[0].method, (*seen)[0].path)
	}

	srv, seen = fakeServer(t, http.StatusNoContent, "", nil)
	if err := New(srv.URL).DeleteSnapshot(ctx, "snap_1"); err != nil {
		t.Fatal(err)
	}
	if r := (*seen)[0]; r.method != http.MethodDelete || r.path != "/api/v1/snapshots/snap_1" {
		t.Errorf("delete sent %s %s", r.method, r.path)
	}

	srv, _ = fakeServer(t, http.StatusNotFound, `{"status":404,"title":"Not Found","detail":"snapshot not found"}`, nil)
	var apiErr *APIError
	if err := New(srv.URL).DeleteSnapshot(ctx, "snap_x"); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("deleting an unknown snapshot: %v, want a 404 *APIError", err)
	}
}

// TestResumedAndHibernatedDecode: a cell's result says when it resumed a
// hibernated session, and a session's state may be hibernated.
func TestResumedAndHibernatedDecode(t *testing.T) {
	srv, _ := fakeServer(t, http.StatusOK, `{"status":"completed","result":"1","session_id":"ses_1","execution_count":4,"resumed":true}`, nil)
	r, err := New(srv.URL).ExecuteCell(context.Background(), "ses_1", &CellRequest{Code: "1"})
	if err != nil || !r.Resumed || r.ExecutionCount != 4 {
		t.Errorf("cell %+v, %v: want resumed", r, err)
	}
	srv, _ = fakeServer(t, http.StatusOK, `{"session_id":"ses_1","state":"hibernated","memory_bytes":0}`, nil)
	s, err := New(srv.URL).GetSession(context.Background(), "ses_1")
	if err != nil || s.State != SessionHibernated {
		t.Errorf("session %+v, %v: want hibernated", s, err)
	}
}

// TestRestoredFromDecode: the first cell of a session resumed from its
// checkpoint after its node was lost names the checkpoint and the cells
// lost; another cell has none.
func TestRestoredFromDecode(t *testing.T) {
	srv, _ := fakeServer(t, http.StatusOK, `{"status":"completed","session_id":"ses_1","execution_count":3,"resumed":true,`+
		`"restored_from":{"snapshot_id":"snap_1","cells_lost":2,"checkpoint_execution_count":1}}`, nil)
	r, err := New(srv.URL).ExecuteCell(context.Background(), "ses_1", &CellRequest{Code: "1"})
	if err != nil || r.RestoredFrom == nil || *r.RestoredFrom != (RestoredFrom{SnapshotID: "snap_1", CellsLost: 2, CheckpointExecutionCount: 1}) {
		t.Errorf("cell %+v, %v: want restored from snap_1, 2 cells lost", r, err)
	}
	srv, _ = fakeServer(t, http.StatusOK, `{"status":"completed","session_id":"ses_1","execution_count":4}`, nil)
	if r, err := New(srv.URL).ExecuteCell(context.Background(), "ses_1", &CellRequest{Code: "1"}); err != nil || r.RestoredFrom != nil {
		t.Errorf("a later cell %+v, %v: want no restored_from", r, err)
	}
}
