package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// pandasProbe is a session's first cell: whether pandas was imported
// before the cell ran, then the import itself.
const pandasProbe = "import sys\nhad = 'pandas' in sys.modules\nimport pandas\nhad"

// sessionCreate (P6): creating a session in the base environment until it
// answers, and its first cell importing pandas, on the default server
// (kernels forked from the base environment's fork server, pandas
// preloaded) against --fork-server=false (each kernel a cold interpreter
// in a jail of its own), interleaved; then what an idle session holds.
func sessionCreate(ctx context.Context, s servers, n int) ([]row, []string, error) {
	// The first session of each server builds the base environment (and,
	// forking, starts its fork server): not measured.
	for _, srv := range []*server{s.fork, s.jails} {
		id, err := srv.createSession(ctx, "")
		if err != nil {
			return nil, nil, fmt.Errorf("a session in the base environment: %w", err)
		}
		_, err = srv.cell(ctx, id, pandasProbe)
		srv.deleteSession(ctx, id)
		if err != nil {
			return nil, nil, err
		}
	}
	type path struct {
		srv                  *server
		create, first, total []time.Duration
		preloaded            int
	}
	forked, cold := &path{srv: s.fork}, &path{srv: s.jails}
	for i := 0; i < n; i++ {
		for _, p := range []*path{forked, cold} {
			t := time.Now()
			id, err := p.srv.createSession(ctx, "")
			if err != nil {
				return nil, nil, err
			}
			p.create = append(p.create, time.Since(t))
			t = time.Now()
			out, err := p.srv.cell(ctx, id, pandasProbe)
			p.first = append(p.first, time.Since(t))
			p.total = append(p.total, p.create[len(p.create)-1]+p.first[len(p.first)-1])
			p.srv.deleteSession(ctx, id)
			if err != nil {
				return nil, nil, err
			}
			var r struct {
				Result string `json:"result"`
			}
			if err := json.Unmarshal(out, &r); err != nil {
				return nil, nil, err
			}
			if r.Result == "True" {
				p.preloaded++
			}
		}
	}
	rows := []row{
		summarize("P6 session create: forked from the fork server", forked.create, nil),
		summarize("P6 session create: cold (--fork-server=false)", cold.create, nil),
	}
	rows[0].ratio = float64(rows[0].p50) / float64(rows[1].p50)
	first := []row{
		summarize("P6 first cell `import pandas`: forked session", forked.first, nil),
		summarize("P6 first cell `import pandas`: cold session", cold.first, nil),
	}
	first[0].ratio = float64(first[0].p50) / float64(first[1].p50)
	total := []row{
		summarize("P6 create + first cell: forked session", forked.total, nil),
		summarize("P6 create + first cell: cold session", cold.total, nil),
	}
	total[0].ratio = float64(total[0].p50) / float64(total[1].p50)
	first = append(first, total...)
	notes := []string{fmt.Sprintf("P6: pandas was in sys.modules before the first cell in %d of %d forked sessions and %d of %d cold ones",
		forked.preloaded, n, cold.preloaded, n)}
	return append(rows, first...), notes, nil
}

// sessionMemory reports what an idle session holds (its cgroup's charge)
// after its first cell imported pandas: forked (its own pages; the rest is
// shared with its fork server) and cold.
func sessionMemory(ctx context.Context, s servers, k int) ([]string, error) {
	mib := func(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
	var out []string
	for _, c := range []struct {
		srv   *server
		what  string
		total string
	}{
		{s.fork, "idle forked session after `import pandas`, own pages", "pyexec_pool_forked_session_memory_bytes"},
		{s.jails, "idle cold session after `import pandas`", "pyexec_sessions_memory_bytes"},
	} {
		var ids []string
		var took []string
		for i := 0; i < k; i++ {
			t := time.Now()
			id, err := c.srv.createSession(ctx, "")
			if err != nil {
				return nil, err
			}
			took = append(took, ms(time.Since(t)))
			ids = append(ids, id)
			if _, err := c.srv.cell(ctx, id, pandasProbe); err != nil {
				return nil, err
			}
		}
		time.Sleep(500 * time.Millisecond) // let the charge settle
		m, err := c.srv.Metrics(ctx)
		for _, id := range ids {
			c.srv.deleteSession(ctx, id)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("%s: %s each (%s over %d); their creates, one after another, each followed by its first cell: %s",
			c.what, mib(m[c.total]/float64(k)), mib(m[c.total]), k, strings.Join(took, ", ")))
		if c.srv == s.fork {
			out = append(out, fmt.Sprintf("fork servers they share (interpreter + preloads): %s over %.0f",
				mib(m["pyexec_pool_fork_server_memory_bytes"]), m["pyexec_pool_fork_servers"]))
		}
	}
	return out, nil
}

// runP6 runs and prints the session scenarios alone (bench -p6).
func runP6(ctx context.Context, s servers, n int) int {
	rows, notes, err := sessionCreate(ctx, s, max(20, n))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	mem, err := sessionMemory(ctx, s, 4)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	fmt.Printf("pyexec benchmark, sessions (P6) — %s, %d iterations\n\n", time.Now().UTC().Format(time.RFC3339), max(20, n))
	fmt.Println(renderTable(rows))
	for _, note := range append(notes, mem...) {
		fmt.Println("note: " + note)
	}
	fmt.Println("\ncommand: " + strings.Join(os.Args, " "))
	return 0
}
