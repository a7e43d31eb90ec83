package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"
)

// The "new code each request" scenario: what an agent sends — a snippet the
// server has never seen, every turn — against bare Python running the same
// code, interleaved in one run, with the same code repeated as a second
// row. It needs the base environment with pandas, which the server builds
// from PyPI on first use.

// newCodeKind is one kind of snippet; code returns a snippet no request of
// the run has sent before for each new n.
type newCodeKind struct {
	name   string
	code   func(n int64) string
	pandas bool // needs pandas: the baseline is the environment's python
	// network asks for network with an allow list (benchAllow): the
	// execution gets its egress; the snippet connects nowhere.
	network bool
}

// benchAllow is the allow list of the network kind: the server's only
// name (--network-allow), never looked up, since the snippet connects
// nowhere.
const benchAllow = "bench.test"

// networkFlags are what the default server needs for the network kind
// (root only: each egress device is made in a jail's namespace).
var networkFlags = []string{"--allow-network", "--network-allow", benchAllow}

var newCodeKinds = []newCodeKind{
	{name: "print", code: func(n int64) string { return fmt.Sprintf("print(%d)", n) }},
	{name: "print, network on", network: true, code: func(n int64) string { return fmt.Sprintf("print(%d)", n) }},
	{name: "stdlib imports", code: func(n int64) string {
		return fmt.Sprintf("import json, re, math\nprint(json.dumps({'v': math.sqrt(%d)}), re.sub('a', 'b', 'a%d'))", n, n)
	}},
	{name: "pandas", pandas: true, code: func(n int64) string {
		return fmt.Sprintf("import pandas as pd\ndf = pd.DataFrame({'x': range(%d)})\nprint(int(df['x'].sum()) + %d)", n%50+3, n)
	}},
}

// Row names: targets.go reads them.
func newCodeName(kind string) string {
	return "new code each request, " + kind + ": pyexec /api/v1/eval"
}
func newCodeBare(kind string) string {
	if kind == "pandas" {
		return "new code each request, pandas: bare venv python -I -c (pandas imported)"
	}
	return "new code each request, " + kind + ": bare python -I -S -c"
}
func repeatedName(kind string) string {
	return "the same code repeated, " + kind + ": pyexec /api/v1/eval"
}

const newCodeRate = "throughput of new-code print"

// newCode numbers the snippets of a run.
type newCode struct {
	next           atomic.Int64
	python, venvPy string
	s              *server
}

// prepareNewCode builds (or finds) the base environment, warms the fork
// servers of each kind of snippet and returns the environment's python.
func prepareNewCode(ctx context.Context, s *server, python string) (*newCode, error) {
	probe, _ := json.Marshal(map[string]any{"code": "import sys, pandas; print(sys.executable)", "requirements_txt": plotRequirements,
		"config": map[string]any{"timeout_seconds": 300}})
	r, err := s.post(ctx, probe)
	if err != nil {
		return nil, fmt.Errorf("the base environment with pandas: %w", err)
	}
	nc := &newCode{python: python, venvPy: strings.TrimSpace(r.Stdout), s: s}
	nc.next.Store(1000)
	for _, k := range newCodeKinds {
		for i := 0; i < 5; i++ { // the first runs start the kind's fork server and pool
			if _, err := nc.eval(ctx, k, k.code(nc.next.Add(1)), 300); err != nil {
				return nil, fmt.Errorf("warming up %s: %w", k.name, err)
			}
		}
	}
	return nc, nil
}

// eval runs code of kind k through /api/v1/eval (with network, when k
// asks for it).
func (nc *newCode) eval(ctx context.Context, k newCodeKind, code string, timeout int) (result, error) {
	cfg := map[string]any{"timeout_seconds": timeout}
	if k.network {
		cfg["network"] = map[string]any{"allow": []string{benchAllow}}
	}
	body, _ := json.Marshal(map[string]any{"code": code, "config": cfg})
	r, err := nc.s.post(ctx, body)
	if err == nil && r.Stdout == "" {
		err = fmt.Errorf("%q printed nothing", code)
	}
	return r.result, err
}

// bare runs code unsandboxed: python -I -S -c, or for pandas the
// environment's python -I -c (site on, so that it sees its packages).
func (nc *newCode) bare(ctx context.Context, k newCodeKind, code string) error {
	if k.pandas {
		return exec.CommandContext(ctx, nc.venvPy, "-I", "-c", code).Run()
	}
	return bareStrict(ctx, nc.python, code)
}

// latency: for each kind, n times interleaved, the bare baseline (for
// pandas every fourth time: an import of pandas takes a second), a new
// snippet through the API and the kind's first snippet again, those two
// in alternating order.
func (nc *newCode) latency(ctx context.Context, n int) ([]row, error) {
	var rows []row
	for _, k := range newCodeKinds {
		same := k.code(1)
		var b, fresh, rep []time.Duration
		for i := 0; i < n; i++ {
			if !k.pandas || i%4 == 0 {
				t := time.Now()
				if err := nc.bare(ctx, k, k.code(nc.next.Add(1))); err != nil {
					return nil, fmt.Errorf("bare %s: %w", k.name, err)
				}
				b = append(b, time.Since(t))
			}
			// The two take turns going first: the second of a pair may
			// find the pool still refilling after the first.
			pair := []struct {
				code string
				d    *[]time.Duration
			}{{k.code(nc.next.Add(1)), &fresh}, {same, &rep}}
			if i%2 == 1 {
				pair[0], pair[1] = pair[1], pair[0]
			}
			for _, m := range pair {
				t := time.Now()
				if _, err := nc.eval(ctx, k, m.code, 60); err != nil {
					return nil, err
				}
				*m.d = append(*m.d, time.Since(t))
			}
		}
		base := summarize(newCodeBare(k.name), b, nil)
		rows = append(rows, base, summarize(newCodeName(k.name), fresh, &base), summarize(repeatedName(k.name), rep, &base))
	}
	return rows, nil
}

// throughput: new print snippets through the API at c=1 and c=8 against
// bare python -I -S -c spawns of new snippets, and the same snippet
// repeated, interleaved; with the CPU each execution cost.
func (nc *newCode) throughput(ctx context.Context, total int) ([]row, []string, error) {
	var rows []row
	var notes []string
	printKind := newCodeKinds[0]
	for _, c := range []int{1, 8} {
		sides, err := interleaved(nc.s, c, total,
			func() error { return bareStrict(ctx, nc.python, printKind.code(nc.next.Add(1))) },
			func() error { _, err := nc.eval(ctx, printKind, printKind.code(nc.next.Add(1)), 60); return err },
			func() error { _, err := nc.eval(ctx, printKind, "print(1)", 60); return err })
		if err != nil {
			return nil, nil, err
		}
		b, fresh, rep := sides[0].perSec(), sides[1].perSec(), sides[2].perSec()
		rows = append(rows, row{name: fmt.Sprintf("%s c=%d: bare -I -S / pyexec (exec/s)", newCodeRate, c), rate: true, base: b, value: fresh})
		notes = append(notes, fmt.Sprintf("new code at c=%d: %.1f/s, the same code repeated %.1f/s (%.2f×)", c, fresh, rep, fresh/rep),
			fmt.Sprintf("CPU per new-code execution at c=%d: bare -I -S spawn %s (machine, busy %s); pyexec %s (machine, busy %s), of which the server process %s",
				c, sides[0].machinePer(), sides[0].busy(), sides[1].machinePer(), sides[1].busy(), sides[1].serverPer()))
	}
	return rows, notes, nil
}

// runNewCode runs the new-code scenario alone and states its targets.
func runNewCode(ctx context.Context, s servers, python string, n, total int) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	nc, err := prepareNewCode(ctx, s.fork, python)
	if err != nil {
		return fail(err)
	}
	rows, err := nc.latency(ctx, n)
	if err != nil {
		return fail(err)
	}
	rates, notes, err := nc.throughput(ctx, total)
	if err != nil {
		return fail(err)
	}
	rows = append(rows, rates...)
	fmt.Printf("pyexec benchmark, new code each request — %s, interpreter %s, %d iterations\n\n", time.Now().UTC().Format(time.RFC3339), python, n)
	fmt.Println(renderTable(rows))
	for _, note := range notes {
		fmt.Println("note: " + note)
	}
	fmt.Println()
	for _, t := range targets(rows) {
		if strings.Contains(t, "new") {
			fmt.Println("target: " + t)
		}
	}
	fmt.Println("\ncommand: " + strings.Join(os.Args, " "))
	return 0
}
