package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

// plotCode summarizes a DataFrame and plots it: pandas and matplotlib, the
// snippet a data-science user sends. Through pyexec the open figure comes
// back as an image/png output; bare, the same figure is rendered to PNG.
const plotCode = `import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
df = pd.DataFrame(np.random.default_rng().normal(size=(1000, 4)), columns=list("abcd"))
print(df.describe())
df.cumsum().plot()
`

// plotBare renders the open figure as pyexec's driver does when the
// snippet ends (runner/driver.py, figure and bundle): to PNG in memory at
// zlib level 1 (the same pixels as savefig's default level 6, ≈ 6 ms less
// to encode), base64 for the JSON output, and its text/plain repr — so the
// floor does the same work as the execution, and closes it as the driver
// does.
const plotBare = plotCode + `import io, binascii
fig = plt.gcf()
buf = io.BytesIO()
fig.savefig(buf, format="png", pil_kwargs={"compress_level": 1})
out = {"image/png": binascii.b2a_base64(buf.getvalue(), newline=False).decode("ascii"), "text/plain": repr(fig)}
plt.close(fig)
`

// plotRequirements is the environment both run in: the server builds it
// once (from PyPI) and every configuration reuses it.
const plotRequirements = "pandas\nmatplotlib\n"

// richResult is the part of a rich ExecutionResult the benchmark reads.
type richResult struct {
	result
	Stderr  string `json:"stderr"`
	Outputs []struct {
		Data map[string]json.RawMessage `json:"data"`
	} `json:"outputs"`
}

// post sends body (a JSON request) to /api/v1/eval and checks that the
// execution completed with exit code 0.
func (s *server) post(ctx context.Context, body []byte) (richResult, error) {
	var r richResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/v1/eval", bytes.NewReader(body))
	if err != nil {
		return r, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
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

// plot runs plotCode and checks that a decodable PNG came back.
func (s *server) plot(ctx context.Context) (richResult, error) {
	body, _ := json.Marshal(map[string]any{"code": plotCode, "requirements_txt": plotRequirements,
		"config": map[string]any{"timeout_seconds": 300}})
	r, err := s.post(ctx, body)
	if err != nil {
		return r, err
	}
	for _, o := range r.Outputs {
		var b64 string
		if json.Unmarshal(o.Data["image/png"], &b64) != nil {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return r, err
		}
		if _, err := png.Decode(bytes.NewReader(raw)); err != nil {
			return r, fmt.Errorf("the plot is not a PNG: %w", err)
		}
		return r, nil
	}
	return r, errors.New("no image/png output")
}

// latencyPlot: the pandas + matplotlib snippet run by bare python of the
// environment, by pyexec with its fork server (numpy, pandas and
// matplotlib preloaded) and by pyexec with every jail cold, interleaved.
func latencyPlot(ctx context.Context, s servers, n int) ([]row, error) {
	// The first run builds the environment; the next ones start the
	// kind's fork server and pool. Neither is measured.
	probe, _ := json.Marshal(map[string]any{"code": "import sys; print(sys.executable)", "requirements_txt": plotRequirements,
		"config": map[string]any{"timeout_seconds": 300}})
	r, err := s.fork.post(ctx, probe)
	if err != nil {
		return nil, fmt.Errorf("an environment with pandas and matplotlib: %w", err)
	}
	python := strings.TrimSpace(r.Stdout)
	for i := 0; i < 3; i++ {
		if _, err := s.fork.plot(ctx); err != nil {
			return nil, err
		}
	}
	// Both kinds (plain and this environment) have a fork server now, and
	// forked executions wait.
	if err := waitMetric(ctx, s.fork, "pyexec_pool_fork_servers", 2); err != nil {
		return nil, err
	}
	if err := waitMetric(ctx, s.fork, "pyexec_pool_forked_ready", 2); err != nil {
		return nil, err
	}
	if _, err := s.cold.plot(ctx); err != nil { // its own data dir: it builds the environment too
		return nil, err
	}
	wf, err := startFloor(ctx, python)
	if err != nil {
		return nil, err
	}
	defer wf.close()
	var floor, b, f, c []time.Duration
	for i := 0; i < n; i++ {
		d, err := wf.next()
		if err != nil {
			return nil, err
		}
		floor = append(floor, d)
		t := time.Now()
		if err := bare(ctx, python, plotBare); err != nil {
			return nil, fmt.Errorf("bare %s: %w", python, err)
		}
		b = append(b, time.Since(t))
		t = time.Now()
		if _, err := s.fork.plot(ctx); err != nil {
			return nil, err
		}
		f = append(f, time.Since(t))
		t = time.Now()
		if _, err := s.cold.plot(ctx); err != nil {
			return nil, err
		}
		c = append(c, time.Since(t))
	}
	base := summarize("pandas describe + matplotlib PNG: bare python (same env)", b, nil)
	return []row{base,
		summarize(p2Floor, floor, &base),
		summarize(p2Name, f, &base),
		summarize("pandas + PNG: pyexec, pool off (cold jail)", c, &base),
	}, nil
}

// warmFloor is one interpreter that imported everything and drew once,
// running the snippet alone on demand: what no sandbox can go below. It
// runs beside the other measurements, one snippet per round, so that the
// floor sees the same load as they do, and is timed as they are, from
// here: the request on its pipe until its answer (a pipe's round trip is
// tens of microseconds; what it adds is the scheduling a loaded machine
// gives any process that wakes up, which pyexec's executions pay too).
type warmFloor struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startFloor(ctx context.Context, python string) (*warmFloor, error) {
	script := fmt.Sprintf(`import sys, time, io, contextlib
src = %q
with contextlib.redirect_stdout(io.StringIO()):
    exec(src)
plt.close("all")
print("ready", flush=True)
for _ in sys.stdin:
    with contextlib.redirect_stdout(io.StringIO()):
        exec(src)
    plt.close("all")
    print("done", flush=True)
`, plotBare)
	cmd := exec.CommandContext(ctx, python, "-c", script)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &warmFloor{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if !f.out.Scan() || f.out.Text() != "ready" {
		f.close()
		return nil, fmt.Errorf("the in-process floor did not start: %v", f.out.Err())
	}
	return f, nil
}

// next runs the snippet once and returns how long it took.
func (f *warmFloor) next() (time.Duration, error) {
	t := time.Now()
	if _, err := io.WriteString(f.in, "\n"); err != nil {
		return 0, err
	}
	if !f.out.Scan() || f.out.Text() != "done" {
		return 0, fmt.Errorf("the in-process floor ended: %v", f.out.Err())
	}
	return time.Since(t), nil
}

func (f *warmFloor) close() {
	f.in.Close()
	_ = f.cmd.Wait()
}

// waitMetric waits until the server's metric reaches n (the pool starts
// fork servers and refills in the background).
func waitMetric(ctx context.Context, s *server, name string, n float64) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v, err := s.metric(ctx, name)
		if err == nil && v >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still %v after 2 minutes (%v)", name, v, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// p2Name and p2Floor name the rows of target P2 (targets.go).
const (
	p2Name  = "pandas + PNG: pyexec /api/v1/eval (fork server, preloaded)"
	p2Floor = "pandas + PNG: the snippet alone in a warm interpreter (floor)"
)

// runP2 runs the pandas + PNG scenario alone, n times, and states P2.
func runP2(ctx context.Context, s servers, n int) int {
	rows, err := latencyPlot(ctx, s, n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	fmt.Printf("pyexec benchmark, pandas + PNG (P2) — %s, %d iterations\n\n", time.Now().UTC().Format(time.RFC3339), n)
	fmt.Println(renderTable(rows))
	for _, t := range targets(rows) {
		if strings.HasPrefix(t, "P2") {
			fmt.Println("target: " + t)
		}
	}
	// The pandas kind's executions, ready again after the run: what each
	// holds of its own (the pages it copied ahead, mostly).
	time.Sleep(2 * time.Second)
	fmt.Println("\nidle forked execution that copied ahead (the pandas kind), own pages: " + copiedAhead(ctx, s.fork))
	if all, err := s.fork.metric(ctx, "pyexec_pool_forked_memory_bytes"); err == nil {
		if c, err := s.fork.metric(ctx, "pyexec_pool_forked_ready"); err == nil && c > 0 {
			fmt.Printf("idle forked executions of every kind, own pages: %.1f MiB each (%.1f MiB over %.0f)\n", all/c/(1<<20), all/(1<<20), c)
		}
	}
	fmt.Println("\ncommand: " + strings.Join(os.Args, " "))
	return 0
}
