// Command store measures listing over a large store: for each N it fills a
// fresh store (embedded NATS in a temporary directory, through the real
// engine with a runner that prints the output instead of running Python)
// with one running execution, the oldest, and N-1 finished ones of a given
// output size, then times GET /api/v1/executions?status=running&limit=1
// (engine.List) and measures how much the process's RSS grows while it
// serves such listings, one at a time and several at once. It also reports
// the bytes stored per execution. It is a measurement tool, not a test.
//
//	go run ./bench/store -n 100,1000,10000 -output 100000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
	"github.com/pyexec/pyexec/internal/testserver"
)

func main() {
	os.Exit(run())
}

func run() int {
	sizes := flag.String("n", "100,1000,10000", "store sizes (records), comma separated; the first is the baseline")
	output := flag.Int("output", 100_000, "stdout bytes of each finished execution")
	workers := flag.Int("workers", 16, "executions filled at once")
	lists := flag.Int("lists", 50, "sequential listings timed per size")
	parallel := flag.Int("parallel", 4, "listings at once in the concurrent round")
	flag.Parse()
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			fmt.Fprintf(os.Stderr, "bench/store: bad size %q\n", s)
			return 2
		}
		ns = append(ns, n)
	}
	fmt.Printf("| records | output B | fill s | store B/exec | list p50 ms | list max ms | %d at once max ms | RSS MiB | RSS growth while listing MiB | RSS vs N=%d MiB |\n", *parallel, ns[0])
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var base float64
	for i, n := range ns {
		r, err := measure(n, *output, *workers, *lists, *parallel)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/store:", err)
			return 1
		}
		if i == 0 {
			base = r.rssAfter
		}
		fmt.Printf("| %d | %d | %.1f | %d | %.2f | %.2f | %.2f | %.0f | %.1f | %+.1f |\n",
			n, *output, r.fill.Seconds(), r.storeBytes/int64(n), ms(r.p50), ms(r.max), ms(r.parMax),
			r.rssAfter, r.growth, r.rssAfter-base)
	}
	return 0
}

type result struct {
	fill       time.Duration
	storeBytes int64
	p50, max   time.Duration
	parMax     time.Duration
	rssAfter   float64 // MiB once filled, before listing
	growth     float64 // MiB: peak while listing minus rssAfter
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func measure(n, output, workers, lists, parallel int) (*result, error) {
	dir, err := os.MkdirTemp("", "pyexec-bench-store-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	emb, err := store.StartEmbedded(ctx, dir, nil)
	if err != nil {
		return nil, err
	}
	defer emb.Close()
	st, err := store.Open(ctx, emb.Conn(), store.Config{})
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(engine.Config{Concurrency: workers + 1, QueueSize: 4 * workers, OutputBytes: int64(output) + 1},
		engine.Deps{Store: st, Runner: printer{}, Interpreters: oneInterpreter{}, Driver: plainDriver{},
			Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	if err := eng.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = eng.Close(cctx)
	}()

	r := &result{}
	start := time.Now()
	running, err := eng.Submit(ctx, request("block"))
	if err != nil {
		return nil, err
	}
	for {
		x, err := eng.Get(ctx, engine.Caller{Name: benchCaller}, running)
		if err != nil {
			return nil, err
		}
		if x.Status == engine.StatusRunning {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := fill(ctx, eng, n-1, output, workers); err != nil {
		return nil, err
	}
	r.fill = time.Since(start)
	if r.storeBytes, err = st.Usage(ctx); err != nil {
		return nil, err
	}

	list := func() (time.Duration, error) {
		t := time.Now()
		page, _, err := eng.List(ctx, engine.ListOptions{Status: engine.StatusRunning, Limit: 1, AllOwners: true})
		if err != nil {
			return 0, err
		}
		if len(page) != 1 || page[0].ID != running {
			return 0, fmt.Errorf("listing running executions returned %d, want %s", len(page), running)
		}
		return time.Since(t), nil
	}
	runtime.GC()
	debug.FreeOSMemory()
	r.rssAfter = rssMiB("VmRSS")
	resetPeak()
	var times []time.Duration
	for range lists {
		d, err := list()
		if err != nil {
			return nil, err
		}
		times = append(times, d)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for range parallel {
		wg.Go(func() {
			for range lists / parallel {
				d, err := list()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				r.parMax = max(r.parMax, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	r.growth = rssMiB("VmHWM") - r.rssAfter
	slices.Sort(times)
	r.p50, r.max = times[len(times)/2], times[len(times)-1]
	_, err = eng.Kill(ctx, engine.Caller{Name: benchCaller}, running)
	return r, err
}

// fill runs n executions that print output bytes each, workers at a time.
func fill(ctx context.Context, eng *engine.Engine, n, output, workers int) error {
	code := "print:" + strconv.Itoa(output)
	jobs := make(chan struct{})
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range jobs {
				x, err := eng.RunSync(ctx, request(code))
				if err == nil && x.Status != engine.StatusCompleted {
					err = fmt.Errorf("execution %s ended %s: %s", x.ID, x.Status, x.Error)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for range n {
		select {
		case jobs <- struct{}{}:
		case err = <-errs:
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err != nil {
		return err
	}
	select {
	case err = <-errs:
	default:
	}
	return err
}

func request(code string) engine.Request {
	return engine.Request{Files: []engine.File{{Path: "main.py", Data: []byte(code)}}, Entrypoint: "main.py", Caller: benchCaller}
}

// printer stands in for the jail: "print:N" writes N bytes of text lines
// to stdout; "block" runs until it is stopped.
type printer struct{}

func (printer) Run(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc) (sandbox.Result, error) {
	code := string(spec.Files[0].Data)
	res := sandbox.Result{Status: sandbox.StatusOK}
	if code == "block" {
		<-ctx.Done()
		res.Status, res.ExitCode = sandbox.StatusKilled, 137
		return res, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(code, "print:"))
	if err != nil {
		return res, fmt.Errorf("printer: %q: %w", code, err)
	}
	line := []byte(strings.Repeat("x", 99) + "\n")
	for len(res.Stdout) < n {
		chunk := line[:min(len(line), n-len(res.Stdout))]
		out(sandbox.Stdout, chunk)
		res.Stdout = append(res.Stdout, chunk...)
	}
	res.WallTime = time.Millisecond
	return res, nil
}

type oneInterpreter struct{}

func (oneInterpreter) Lookup(string) (engine.Interpreter, error) {
	return engine.Interpreter{Version: "3.12.0", Path: "/usr/bin/python3"}, nil
}

type plainDriver struct{}

func (plainDriver) Argv(python, entrypoint string, opts engine.DriverOptions) []string {
	return append([]string{python, entrypoint}, opts.Args...)
}

func (plainDriver) Parse([]byte) (engine.Report, error) {
	return engine.Report{}, errors.New("no report")
}

// rssMiB reads a field of this process's /proc status (VmRSS, VmHWM) in
// MiB; 0 when it cannot.
func rssMiB(field string) float64 {
	b, _ := testserver.ProcStatusBytes(os.Getpid(), field)
	return float64(b) / (1 << 20)
}

// resetPeak makes VmHWM start again from the current RSS.
func resetPeak() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// benchCaller owns every execution the bench makes.
const benchCaller = "bench"
