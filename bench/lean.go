package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// leanName names the row of print(1) in the pandas environment.
const leanName = "print(1) in the pandas env: pyexec /api/v1/eval (lean fork server)"

// latencyLean: print(1) in the environment of the pandas scenario (sent
// with its requirements), spawned bare with that environment's interpreter
// (python -I -S -c) and through /api/v1/eval, interleaved. Code that needs
// only the standard library forks from the environment's lean fork server,
// which imported none of numpy, pandas and matplotlib: forking the full one
// costs several milliseconds of page tables per execution. latencyPlot has
// built the environment.
func latencyLean(ctx context.Context, s *server, n int) ([]row, error) {
	post := func(code string) (richResult, error) {
		body, _ := json.Marshal(map[string]any{"code": code, "requirements_txt": plotRequirements,
			"config": map[string]any{"timeout_seconds": 300}})
		return s.post(ctx, body)
	}
	r, err := post("import sys; print(sys.executable)")
	if err != nil {
		return nil, err
	}
	python := strings.TrimSpace(r.Stdout)
	// The first runs start the lean fork server and its warm executions.
	for i := 0; i < 5; i++ {
		if _, err := post("print(1)"); err != nil {
			return nil, err
		}
	}
	var b, f []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		if err := bareStrict(ctx, python, "print(1)"); err != nil {
			return nil, fmt.Errorf("bare %s: %w", python, err)
		}
		b = append(b, time.Since(t))
		t = time.Now()
		r, err := post("print(1)")
		if err != nil {
			return nil, err
		}
		if r.Stdout != "1\n" {
			return nil, fmt.Errorf("print(1) in the pandas env printed %q", r.Stdout)
		}
		f = append(f, time.Since(t))
	}
	base := summarize("print(1) in the pandas env: bare python -I -S -c", b, nil)
	return []row{base, summarize(leanName, f, &base)}, nil
}
