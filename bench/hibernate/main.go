// Command hibernate measures hibernation (issue 30) on a real server: it
// starts `pyexec serve` (the binary given by -pyexec) with a short
// --session-hibernate-after, creates -n sessions holding a small state
// (-small-mb MiB of numpy array, a string, a function) and -k holding a
// -mb MiB pandas DataFrame, and times cells on the large ones. It then
// measures the memory the sessions hold while awake, waits until every
// session has hibernated, measures it again, and times the first call on
// each large session (the resume; its value is checked) and on a sample
// of small ones, then the same cells as before. It prints a markdown
// table with ratios against what the same run measured before the
// hibernation. Root only (jails); a measurement, not a test.
//
// Memory is read in three places: the sum of the sessions'
// `memory_bytes` (the server's own account: each session jail's cgroup
// charge), the cgroup parent every jail of the server lives below (its
// usage, which also sees what a session's jail could leave behind once
// its kernel ended: a cgroup kept for reuse, page cache charged to it),
// and the server process's resident set (the embedded store, which the
// snapshots go through).
//
//	go build -o bin/pyexec ./cmd/pyexec
//	flock /tmp/pyexec-jail-tests.lock go run ./bench/hibernate -pyexec bin/pyexec -n 200 -k 2 -mb 100
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/client"
	"github.com/pyexec/pyexec/internal/testserver"
)

func main() {
	os.Exit(run())
}

type config struct {
	binary           string
	n, k, mb, smalMB int
	after            int
	calls, sample    int
	workers          int
	heapProfile      string
	linger           time.Duration
}

func run() int {
	var c config
	flag.StringVar(&c.binary, "pyexec", "bin/pyexec", "pyexec binary to measure")
	flag.IntVar(&c.n, "n", 200, "sessions holding a small state")
	flag.IntVar(&c.k, "k", 2, "sessions holding a large DataFrame")
	flag.IntVar(&c.mb, "mb", 100, "MiB of DataFrame in each large session")
	flag.IntVar(&c.smalMB, "small-mb", 4, "MiB of numpy array in each small session")
	flag.IntVar(&c.after, "after", 60, "--session-hibernate-after, seconds: creating the sessions and the cells before must fit in it")
	flag.IntVar(&c.calls, "calls", 20, "cells of each kind timed on each large session, before and after")
	flag.IntVar(&c.sample, "sample", 20, "small sessions whose first call after hibernation is timed")
	flag.IntVar(&c.workers, "workers", 4, "sessions created at once")
	flag.StringVar(&c.heapProfile, "heap-profile", "", "with PYEXEC_PPROF_ADDR set (the server serves /debug/pprof/ there), write its heap profile, taken after two GCs, to this file once every session hibernated")
	flag.DurationVar(&c.linger, "linger", 0, "once every session hibernated, wait this long and read the memory again (does the server give it back by itself?)")
	flag.Parse()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "bench/hibernate:", err)
		return 1
	}
	if os.Geteuid() != 0 {
		return fail(errors.New("builds jails: run it as root"))
	}
	bin, err := filepath.Abs(c.binary)
	if err != nil {
		return fail(err)
	}
	c.binary = bin
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	parent := fmt.Sprintf("pyexec-hibbench-%d", os.Getpid())
	defer func() {
		if err := testserver.RemoveCgroups(parent); err != nil {
			fmt.Fprintln(os.Stderr, "bench/hibernate: removing the cgroup parent:", err)
		}
	}()
	total := c.n + c.k
	srv, err := testserver.RunInNewDir(ctx, "pyexec-hibbench-", testserver.Config{
		Binary: c.binary, CgroupParent: parent, StopTimeout: 2 * time.Minute,
		Flags: []string{"--log-level", "warn", "--base-packages", "pandas",
			"--max-sessions", strconv.Itoa(total + 4), "--max-sessions-per-key", strconv.Itoa(total + 4),
			"--session-hibernate-after", strconv.Itoa(c.after), "--session-idle-timeout", "3600",
			"--shutdown-timeout", "90"},
	})
	if err != nil {
		return fail(err)
	}
	defer srv.Close()
	b := &bench{config: c, srv: srv, px: client.New(srv.URL, client.WithTimeout(5*time.Minute)), cg: memoryCgroup(parent)}
	out, err := b.measure(ctx)
	b.cleanup()
	if err != nil {
		return fail(err)
	}
	fmt.Print(out)
	fmt.Println("\ncommand: " + strings.Join(os.Args, " "))
	return 0
}

type bench struct {
	config
	srv        *testserver.Server
	px         *client.Client
	cg         string // the cgroup parent's directory in the memory hierarchy
	big, small []string
	want       map[string]string // the probe's answer of each session before
}

// Cells of a large session: the state, the value checked after the
// resume, and the two cells timed before and after.
func bigState(mb int) string {
	return fmt.Sprintf(`import numpy as np, pandas as pd
rng = np.random.default_rng(7)
df = pd.DataFrame(rng.normal(size=(%d, 10)), columns=[f"c{i}" for i in range(10)])
def scale(v, k=2.0):
    return v * k
n = 0`, mb<<20/80)
}

const (
	bigProbe   = "(df.shape, float(df.values.sum()), scale(3))"
	cellTrivia = "n += 1"
	cellScan   = "float(df['c3'].sum())"
	smallProbe = "(tag, float(a.sum()), f(1))"
)

func smallState(mb, i int) string {
	return fmt.Sprintf("import numpy as np\na = np.arange(%d, dtype=np.float64)\ntag = 'session %d'\ndef f(v):\n    return v + %d",
		mb<<20/8, i, i)
}

func (b *bench) measure(ctx context.Context) (string, error) {
	idle := b.memory(ctx)
	t0 := time.Now()
	b.want = map[string]string{}
	var err error
	if b.big, err = b.create(ctx, b.k, 1, func(int) (int, string) { return 4*b.mb + 256, bigState(b.mb) }, bigProbe); err != nil {
		return "", err
	}
	if b.small, err = b.create(ctx, b.n, b.workers, func(i int) (int, string) { return 0, smallState(b.smalMB, i) }, smallProbe); err != nil {
		return "", err
	}
	created := time.Since(t0)
	before, err := b.timeCells(ctx)
	if err != nil {
		return "", err
	}
	awake := b.memory(ctx)
	if awake.hibernated > 0 {
		return "", fmt.Errorf("%d sessions hibernated before the awake measurement (creating took %s): raise -after", awake.hibernated, created.Round(time.Second))
	}
	lastCell := time.Now()

	slept, err := b.waitHibernated(ctx)
	if err != nil {
		return "", err
	}
	allAsleep := time.Since(lastCell)
	asleep := b.settled(ctx)
	var lingered *mem
	if b.linger > 0 {
		time.Sleep(b.linger)
		m := b.memory(ctx)
		lingered = &m
	}
	var afterGC *mem
	if b.heapProfile != "" {
		if err := b.writeHeapProfile(ctx); err != nil {
			return "", err
		}
		m := b.memory(ctx)
		afterGC = &m
	}

	first := map[string][]time.Duration{}
	for _, id := range b.big {
		d, r, err := b.cell(ctx, id, bigProbe)
		if err != nil {
			return "", err
		}
		if !r.Resumed || *r.Result != b.want[id] {
			return "", fmt.Errorf("session %s after hibernation: resumed %v, %s (want %s)", id, r.Resumed, *r.Result, b.want[id])
		}
		first["big"] = append(first["big"], d)
	}
	for _, id := range b.small[:min(b.sample, len(b.small))] {
		d, r, err := b.cell(ctx, id, smallProbe)
		if err != nil {
			return "", err
		}
		if !r.Resumed || *r.Result != b.want[id] {
			return "", fmt.Errorf("session %s after hibernation: resumed %v, %s (want %s)", id, r.Resumed, *r.Result, b.want[id])
		}
		first["small"] = append(first["small"], d)
	}
	after, err := b.timeCells(ctx)
	if err != nil {
		return "", err
	}
	resumed := b.memory(ctx)
	return b.report(created, allAsleep, slept, idle, awake, asleep, lingered, afterGC, resumed, before, first, after), nil
}

// timeCells times b.calls cells of each kind on each large session.
func (b *bench) timeCells(ctx context.Context) (map[string][]time.Duration, error) {
	times := map[string][]time.Duration{}
	for _, id := range b.big {
		for _, code := range []string{cellTrivia, cellScan} {
			for range b.calls {
				d, _, err := b.cell(ctx, id, code)
				if err != nil {
					return nil, err
				}
				times[code] = append(times[code], d)
			}
		}
	}
	return times, nil
}

// create makes count sessions, workers at once, each with the memory and
// state cell spec gives, and records its probe's answer.
func (b *bench) create(ctx context.Context, count, workers int, spec func(int) (int, string), probe string) ([]string, error) {
	ids := make([]string, count)
	var mu sync.Mutex
	var firstErr error
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				id, want, err := b.createOne(ctx, spec, i, probe)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				ids[i], b.want[id] = id, want
				mu.Unlock()
			}
		})
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
	return ids, firstErr
}

// createOne makes session i and returns its id and its probe's answer.
func (b *bench) createOne(ctx context.Context, spec func(int) (int, string), i int, probe string) (string, string, error) {
	mem, state := spec(i)
	s, err := b.px.CreateSession(ctx, &client.SessionRequest{MemoryMB: mem})
	if err != nil {
		return "", "", fmt.Errorf("creating session %d: %w", i, err)
	}
	if _, _, err := b.cell(ctx, s.SessionID, state); err != nil {
		return s.SessionID, "", err
	}
	_, r, err := b.cell(ctx, s.SessionID, probe)
	if err != nil {
		return s.SessionID, "", err
	}
	if r.Result == nil {
		return s.SessionID, "", fmt.Errorf("session %s: the probe answered nothing", s.SessionID)
	}
	return s.SessionID, *r.Result, nil
}

// cell runs code in session id and times the call; an exception is an
// error.
func (b *bench) cell(ctx context.Context, id, code string) (time.Duration, *client.CellResult, error) {
	t := time.Now()
	r, err := b.px.ExecuteCell(ctx, id, &client.CellRequest{Code: code})
	d := time.Since(t)
	if err != nil {
		return d, nil, fmt.Errorf("session %s, cell %.40q: %w", id, code, err)
	}
	if r.Status != client.StatusCompleted || r.ExitCode != 0 {
		return d, nil, fmt.Errorf("session %s, cell %.40q: %s %s", id, code, r.Status, r.Error)
	}
	return d, r, nil
}

// waitHibernated waits until every session says it hibernated, and
// returns how many did.
func (b *bench) waitHibernated(ctx context.Context) (int, error) {
	deadline := time.Now().Add(time.Duration(b.after)*time.Second + time.Duration(b.n+b.k)*2*time.Second + time.Minute)
	for time.Now().Before(deadline) {
		m := b.memory(ctx)
		if m.err != nil {
			return 0, m.err
		}
		if m.hibernated == b.n+b.k {
			return m.hibernated, nil
		}
		time.Sleep(time.Second)
	}
	return 0, fmt.Errorf("not every session hibernated by %s", deadline.Format(time.TimeOnly))
}

// settled measures once the cgroup parent's usage stopped falling: a
// kernel's cgroup is emptied and released a moment after it ended.
func (b *bench) settled(ctx context.Context) mem {
	m := b.memory(ctx)
	for range 10 {
		time.Sleep(time.Second)
		n := b.memory(ctx)
		if n.parent >= m.parent-(1<<20) {
			return n
		}
		m = n
	}
	return m
}

// writeHeapProfile saves the server's heap profile to b.heapProfile,
// taken twice with gc=1 (a collection first): what a sync.Pool holds
// survives one collection, so the second profile holds only what is
// reachable.
func (b *bench) writeHeapProfile(ctx context.Context) error {
	addr := os.Getenv("PYEXEC_PPROF_ADDR")
	if addr == "" {
		return errors.New("-heap-profile needs PYEXEC_PPROF_ADDR")
	}
	var resp *http.Response
	for range 2 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1", nil)
		if err != nil {
			return err
		}
		if resp != nil {
			resp.Body.Close()
		}
		if resp, err = http.DefaultClient.Do(req); err != nil {
			return err
		}
	}
	defer resp.Body.Close()
	f, err := os.Create(b.heapProfile)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, id := range slices.Concat(b.big, b.small) {
		if id != "" {
			_ = b.px.DeleteSession(ctx, id)
		}
	}
}
