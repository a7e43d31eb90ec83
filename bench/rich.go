package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// frameCode builds a 200×5 DataFrame; as the last expression its value
// comes back as text/html and application/json outputs.
const frameCode = `import pandas as pd
df = pd.DataFrame({c: range(200) for c in "abcde"})
df`

// frameRequirements makes the server build (once) and reuse an
// environment with pandas: a one-shot execution needs no session.
const frameRequirements = "pandas\n"

// richResult is the part of a rich ExecutionResult the benchmark reads.
type richResult struct {
	result
	Stderr  string `json:"stderr"`
	Outputs []struct {
		Data map[string]json.RawMessage `json:"data"`
	} `json:"outputs"`
}

// evalFrame runs frameCode once, unmeasured, and returns the request body
// to measure and the python that ran it (sys.executable). The server's
// own interpreter is used when it has pandas; otherwise the server builds
// (once, from PyPI) an environment with it and reuses it afterwards.
func (s *server) evalFrame(ctx context.Context) (body []byte, python string, err error) {
	probe := frameCode + "\nimport sys; print(sys.executable)"
	var errs []error
	for _, reqs := range []string{"", frameRequirements} {
		first, _ := json.Marshal(map[string]any{"code": probe, "requirements_txt": reqs, "config": map[string]any{"timeout_seconds": 300}})
		r, err := s.post(ctx, first)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		body, _ = json.Marshal(map[string]any{"code": frameCode, "eval_last_expr": true, "requirements_txt": reqs})
		return body, strings.TrimSpace(r.Stdout), nil
	}
	return nil, "", errors.Join(errs...)
}

func (s *server) post(ctx context.Context, body []byte) (richResult, error) {
	var r richResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/api/v1/eval", bytes.NewReader(body))
	if err != nil {
		return r, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&e) // the status alone still says what failed
		return r, fmt.Errorf("eval: HTTP %d %s", resp.StatusCode, e.Error)
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, err
	}
	if r.Status != "completed" || r.ExitCode != 0 {
		return r, fmt.Errorf("eval ended %s (exit %d): %s %s", r.Status, r.ExitCode, r.Error, r.Stderr)
	}
	return r, nil
}

// latencyFrameHTML: a DataFrame returned as HTML by a one-shot eval (no
// session needed), and the same code run by bare python from the same
// environment.
func latencyFrameHTML(ctx context.Context, s *server, n int) ([]row, error) {
	body, python, err := s.evalFrame(ctx)
	if err != nil {
		return nil, fmt.Errorf("no python with pandas: %w", err)
	}
	bareCode := frameCode + "\ndf.to_html(); df.to_json(orient='records')"
	var b, p []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		if err := bare(ctx, python, bareCode); err != nil {
			return nil, fmt.Errorf("bare %s: %w", python, err)
		}
		b = append(b, time.Since(t))
		t = time.Now()
		r, err := s.post(ctx, body)
		if err != nil {
			return nil, err
		}
		p = append(p, time.Since(t))
		if len(r.Outputs) != 1 || !bytes.Contains(r.Outputs[0].Data["text/html"], []byte("<table")) {
			return nil, fmt.Errorf("eval returned no HTML table: %+v", r.Outputs)
		}
	}
	base := summarize("DataFrame → HTML: bare python (same env)", b, nil)
	return []row{base, summarize("DataFrame → HTML: pyexec /api/v1/eval", p, &base)}, nil
}
