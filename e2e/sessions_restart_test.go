package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// TestSessionSurvivesGracefulRestart: a session idle when its server gets
// SIGTERM is saved; the server started again on the same data directory
// answers for it under the same id, hibernated, and its next cell finds
// its variables and files and says it resumed. Another key is told it
// does not exist, before and after it resumed.
func TestSessionSurvivesGracefulRestart(t *testing.T) {
	needRoot(t)
	const keyA, keyB = "key-of-a-0123456789abcdef", "key-of-b-0123456789abcdef"
	args := []string{"--api-keys", "a:" + keyA + ",b:" + keyB}
	data := t.TempDir()
	srv := startServer(t, data, args...)
	type answer struct {
		ID      string `json:"session_id"`
		State   string `json:"state"`
		Count   int    `json:"execution_count"`
		Result  string `json:"result"`
		Stderr  string `json:"stderr"`
		Resumed bool   `json:"resumed"`
	}
	call := func(method, path, key, body string) (int, answer) {
		t.Helper()
		code, b := apiCall(t, srv.url, method, path, key, body)
		var a answer
		if code < 300 {
			if err := json.Unmarshal([]byte(b), &a); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, b)
			}
		}
		return code, a
	}
	code, ses := call(http.MethodPost, "/api/v1/sessions", keyA, `{}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d\n%s", code, srv.logs)
	}
	id := ses.ID
	cell := `{"code": "total = sum(range(1000))\nopen('notes.txt', 'w').write('kept')\ntotal", "eval_last_expr": true}`
	if code, r := call(http.MethodPost, "/api/v1/sessions/"+id+"/execute", keyA, cell); code != http.StatusOK || r.Result != "499500" {
		t.Fatalf("first cell: %d %+v", code, r)
	}

	srv.stop(t)
	srv = startServer(t, data, args...)

	code, ses = call(http.MethodGet, "/api/v1/sessions/"+id, keyA, "")
	if code != http.StatusOK || ses.State != "hibernated" || ses.Count != 1 {
		t.Fatalf("the session after the restart: %d %+v\n%s", code, ses, srv.logs)
	}
	for _, path := range []string{"/api/v1/sessions/" + id, "/api/v1/sessions/" + id + "/files"} {
		if code, _ := call(http.MethodGet, path, keyB, ""); code != http.StatusNotFound {
			t.Errorf("key b: GET %s after the restart: %d, want 404", path, code)
		}
	}
	if code, _ := call(http.MethodPost, "/api/v1/sessions/"+id+"/execute", keyB, `{"code": "1"}`); code != http.StatusNotFound {
		t.Errorf("key b: a cell in a's session after the restart: %d, want 404", code)
	}
	read := `{"code": "total, open('notes.txt').read()", "eval_last_expr": true}`
	code, r := call(http.MethodPost, "/api/v1/sessions/"+id+"/execute", keyA, read)
	if code != http.StatusOK || r.Result != "(499500, 'kept')" || !r.Resumed {
		t.Fatalf("the first cell after the restart: %d %+v\n%s", code, r, srv.logs)
	}
	if code, _ := call(http.MethodGet, "/api/v1/sessions/"+id, keyB, ""); code != http.StatusNotFound {
		t.Errorf("key b: the resumed session: %d, want 404", code)
	}
}

// TestTenSessionsSurviveRestart: ten live sessions of two keys, SIGTERM,
// the server started again: ten of ten answer with their own state.
func TestTenSessionsSurviveRestart(t *testing.T) {
	needRoot(t)
	keys := []string{"key-of-a-0123456789abcdef", "key-of-b-0123456789abcdef"}
	args := []string{"--api-keys", "a:" + keys[0] + ",b:" + keys[1]}
	data := t.TempDir()
	srv := startServer(t, data, args...)
	type session struct{ id, key string }
	var all []session
	for i := range 10 {
		key := keys[i%2]
		code, body := apiCall(t, srv.url, http.MethodPost, "/api/v1/sessions", key, `{"memory_mb": 64}`)
		var ses struct {
			ID string `json:"session_id"`
		}
		if code != http.StatusCreated || json.Unmarshal([]byte(body), &ses) != nil {
			t.Fatalf("session %d: %d %s", i, code, body)
		}
		cell := fmt.Sprintf(`{"code": "mine = %d * 1000"}`, i)
		if code, body := apiCall(t, srv.url, http.MethodPost, "/api/v1/sessions/"+ses.ID+"/execute", key, cell); code != http.StatusOK {
			t.Fatalf("session %d: %d %s", i, code, body)
		}
		all = append(all, session{ses.ID, key})
	}
	srv.stop(t)
	srv = startServer(t, data, args...)
	kept := 0
	for i, s := range all {
		code, body := apiCall(t, srv.url, http.MethodPost, "/api/v1/sessions/"+s.id+"/execute", s.key, `{"code": "mine", "eval_last_expr": true}`)
		var r struct {
			Result  string `json:"result"`
			Resumed bool   `json:"resumed"`
		}
		if code == http.StatusOK && json.Unmarshal([]byte(body), &r) == nil && r.Result == fmt.Sprint(i*1000) && r.Resumed {
			kept++
		} else {
			t.Errorf("session %d after the restart: %d %s", i, code, body)
		}
	}
	if kept != len(all) {
		t.Errorf("%d of %d sessions kept their state across the restart\n%s", kept, len(all), srv.logs)
	}
}
