package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// sessionCells: the round trip of a cell `x += 1` in a live session over
// HTTP, and a cell that renders a DataFrame to HTML (in a session whose
// requirements install pandas; skipped, with a note, when that fails).
func sessionCells(ctx context.Context, s *server, n int) ([]row, []string, error) {
	var notes []string
	id, err := s.createSession(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	defer s.deleteSession(ctx, id)
	if _, err := s.cell(ctx, id, "x = 0"); err != nil {
		return nil, nil, err
	}
	var d []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		if _, err := s.cell(ctx, id, "x += 1"); err != nil {
			return nil, nil, err
		}
		d = append(d, time.Since(t))
	}
	rows := []row{summarize("session cell x += 1 (HTTP round trip)", d, nil)}

	pid, err := s.createSession(ctx, "pandas")
	if err != nil {
		msg := err.Error()
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i] + " …"
		}
		return rows, append(notes, "DataFrame cell skipped: a session with pandas could not be created: "+msg), nil
	}
	defer s.deleteSession(ctx, pid)
	setup := "import pandas as pd\ndf = pd.DataFrame({'a': range(100), 'b': [str(i) for i in range(100)]})"
	if _, err := s.cell(ctx, pid, setup); err != nil {
		return nil, nil, err
	}
	d = d[:0]
	for i := 0; i < n; i++ {
		t := time.Now()
		out, err := s.cell(ctx, pid, "df")
		if err != nil {
			return nil, nil, err
		}
		if !bytes.Contains(out, []byte("text/html")) {
			return nil, nil, fmt.Errorf("DataFrame cell returned no text/html: %.300s", out)
		}
		d = append(d, time.Since(t))
	}
	return append(rows, summarize("session cell: 100-row DataFrame → HTML+JSON", d, nil)), notes, nil
}

func (s *server) createSession(ctx context.Context, requirements string) (string, error) {
	body, _ := json.Marshal(map[string]any{"requirements": requirements, "memory_mb": 256})
	var out struct {
		ID string `json:"session_id"`
	}
	b, err := s.postJSON(ctx, "/api/v1/sessions", body, http.StatusCreated)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

func (s *server) deleteSession(ctx context.Context, id string) {
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodDelete, s.URL+"/api/v1/sessions/"+id, nil)
	if err == nil {
		if resp, err := s.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}
}

// cell runs code in session id and returns the raw result; an exception
// in the cell is an error.
func (s *server) cell(ctx context.Context, id, code string) ([]byte, error) {
	body, _ := json.Marshal(map[string]any{"code": code})
	b, err := s.postJSON(ctx, "/api/v1/sessions/"+id+"/execute", body, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var r result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.Status != "completed" || r.ExitCode != 0 {
		return nil, fmt.Errorf("cell %q: %s exit %d: %s", code, r.Status, r.ExitCode, r.Error)
	}
	return b, nil
}

func (s *server) postJSON(ctx context.Context, path string, body []byte, want int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, buf.Bytes())
	}
	return buf.Bytes(), nil
}
