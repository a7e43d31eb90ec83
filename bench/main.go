// Command bench measures pyexec against bare Python on the same machine in
// the same run, interleaved, and prints a markdown table of percentiles and
// ratios. It starts three `pyexec serve` (the binary given by -pyexec) on
// loopback ports with temporary data dirs: the default configuration (warm
// pool with fork servers), one with --fork-server=false (warm jails) and
// one with --warm-pool=false (every jail cold). It is a measurement tool,
// not a test: nothing here gates CI.
//
//	make bench            # or: go run ./bench -pyexec bin/pyexec -n 100
//	go run ./bench -floor -python python3.12 -n 300   # P3's budget against the jail's kernel floor
//	go run ./bench -newcode -n 60 -requests 160        # new code each request (an agent's workload) alone
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	os.Exit(run())
}

func run() int {
	binary := flag.String("pyexec", "bin/pyexec", "pyexec binary to benchmark")
	n := flag.Int("n", 100, "iterations per latency scenario")
	total := flag.Int("requests", 200, "requests per throughput level")
	onlyP6 := flag.Bool("p6", false, "run only the session scenarios of P6 (create, first cell, memory)")
	onlyP2 := flag.Bool("p2", false, "run only the pandas + PNG scenario of P2 (-n iterations)")
	onlyNew := flag.Bool("newcode", false, "run only the new-code-each-request scenario (-n iterations, -requests per throughput level)")
	floor := flag.Bool("floor", false, "run only the kernel's floor under a forked execution against P3's budget (root; no server)")
	floorPython := flag.String("python", "python3", "interpreter for -floor")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if *floor {
		if os.Geteuid() != 0 {
			return fail(errors.New("-floor makes namespaces and mounts: run it as root"))
		}
		return runFloor(ctx, *floorPython, 10, max(10, *n/10))
	}
	var s servers
	defer removeCgroupParent() // deferred first: runs after every server's stop
	for _, c := range []struct {
		srv   **server
		flags []string
	}{{&s.fork, networkFlags}, {&s.jails, []string{"--fork-server=false"}}, {&s.cold, []string{"--warm-pool=false"}}} {
		srv, err := startServer(ctx, *binary, c.flags...)
		if err != nil {
			return fail(err)
		}
		defer srv.Close()
		*c.srv = srv
	}
	idleRSS, err := s.fork.RSS()
	if err != nil {
		return fail(err)
	}
	python, err := s.fork.interpreter(ctx)
	if err != nil {
		return fail(err)
	}
	for _, srv := range []*server{s.jails, s.cold} {
		if _, err := srv.eval(ctx, "pass"); err != nil { // first use: the kind starts warming
			return fail(err)
		}
	}

	var rows []row
	add := func(r []row, err error) bool {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return false
		}
		rows = append(rows, r...)
		return true
	}
	if *onlyP6 {
		return runP6(ctx, s, *n)
	}
	if *onlyP2 {
		return runP2(ctx, s, *n)
	}
	if *onlyNew {
		return runNewCode(ctx, s, python, *n, *total)
	}
	if !add(latencyPrint(ctx, s, python, *n)) ||
		!add(latencyAsync(ctx, s.fork, *n)) {
		return 1
	}
	rateRows, notes, err := throughput(ctx, s.fork, python, *total, []int{1, 2, 8, 32})
	if !add(rateRows, err) {
		return 1
	}
	sessionRows, sessionNotes, err := sessionCells(ctx, s.fork, *n)
	if !add(sessionRows, err) {
		return 1
	}
	notes = append(notes, sessionNotes...)
	createRows, createNotes, err := sessionCreate(ctx, s, max(20, *n/3))
	if !add(createRows, err) {
		return 1
	}
	notes = append(notes, createNotes...)
	// The pandas scenario needs PyPI for its environment: without it, the
	// report says so and goes on.
	if r, err := latencyPlot(ctx, s, max(5, *n/4)); err != nil {
		fmt.Fprintln(os.Stderr, "bench: pandas + matplotlib skipped:", err)
	} else {
		rows = append(rows, r...)
		add(latencyLean(ctx, s.fork, max(5, *n/2)))
		// New code each request runs in that environment, the base one.
		if nc, err := prepareNewCode(ctx, s.fork, python); err != nil {
			fmt.Fprintln(os.Stderr, "bench: new code each request skipped:", err)
		} else if add(nc.latency(ctx, *n)) {
			rates, rateNotes, err := nc.throughput(ctx, *total)
			if add(rates, err) {
				notes = append(notes, rateNotes...)
			}
		}
	}
	// A run on a loaded machine takes longer than the pool's idle time:
	// the warm jails' kind is used once more, so that it has some to measure.
	if _, err := s.jails.eval(ctx, "pass"); err == nil {
		_ = waitMetric(ctx, s.jails, "pyexec_pool_warm_jails", 1)
	}
	// Whatever memory cannot be measured is said; the table is printed.
	mem, err := memory(ctx, s, idleRSS)
	if err != nil {
		mem = []string{"not measured: " + err.Error()}
	}
	sessMem, err := sessionMemory(ctx, s, 4)
	if err != nil {
		return fail(err)
	}
	mem = append(mem, sessMem...)
	pool, err := s.fork.poolCounters(ctx)
	if err != nil {
		pool = "not read: " + err.Error()
	}

	fmt.Printf("pyexec benchmark — %s, interpreter %s, %d iterations\n\n", time.Now().UTC().Format(time.RFC3339), python, *n)
	fmt.Println(renderTable(rows))
	for _, note := range notes {
		fmt.Println("note: " + note)
	}
	fmt.Println()
	for _, t := range targets(rows) {
		fmt.Println("target: " + t)
	}
	fmt.Println()
	for _, m := range mem {
		fmt.Println("memory: " + m)
	}
	fmt.Printf("\nwarm pool (default server): %s\n", pool)
	fmt.Println("\ncommand: " + strings.Join(os.Args, " "))
	return 0
}

// copiedAhead is what an idle forked execution that copied ahead holds
// of its own, each, or why there is no number.
func copiedAhead(ctx context.Context, srv *server) string {
	t, err := srv.metric(ctx, "pyexec_pool_forked_precopy_memory_bytes")
	if err != nil {
		return "none (" + err.Error() + ")"
	}
	c, err := srv.metric(ctx, "pyexec_pool_forked_precopy_ready")
	if err != nil || c == 0 {
		return fmt.Sprintf("none ready (%v)", err)
	}
	return fmt.Sprintf("%.1f MiB each (%.1f MiB over %.0f)", t/c/(1<<20), t/(1<<20), c)
}

// memory reports the server's idle RSS, what an idle warm jail holds and
// what a fork server and each execution forked from it hold (the cgroup
// charge: a forked execution shares the server's pages copy-on-write and
// is charged only for the pages it wrote).
func memory(ctx context.Context, s servers, idleRSS int64) ([]string, error) {
	mib := func(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
	per := func(srv *server, total, count string) (string, error) {
		t, err := srv.metric(ctx, total)
		if err != nil {
			return "", err
		}
		c, err := srv.metric(ctx, count)
		if err != nil || c == 0 {
			return "", fmt.Errorf("%s: none to measure (%v)", count, err)
		}
		return fmt.Sprintf("%s each (%s over %.0f)", mib(t/c), mib(t), c), nil
	}
	afterRSS, err := s.fork.RSS()
	if err != nil {
		return nil, err
	}
	warm, err := per(s.jails, "pyexec_pool_warm_memory_bytes", "pyexec_pool_warm_jails")
	if err != nil {
		return nil, err
	}
	child, err := per(s.fork, "pyexec_pool_forked_memory_bytes", "pyexec_pool_forked_ready")
	if err != nil {
		return nil, err
	}
	tpl, err := per(s.fork, "pyexec_pool_fork_server_memory_bytes", "pyexec_pool_fork_servers")
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("server RSS idle %s, after the run %s", mib(float64(idleRSS)), mib(float64(afterRSS))),
		"idle pooled warm jail (--fork-server=false): " + warm,
		"idle forked execution, own pages: " + child,
		"… of those, one that copied ahead (a server with preloads: the pandas kind): " + copiedAhead(ctx, s.fork),
		"fork server (interpreter + preloads, shared by its executions): " + tpl,
	}, nil
}
