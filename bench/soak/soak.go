package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pyexec/pyexec/client"
)

// job is one execution the checks expect a result of.
type job struct {
	key  int    // index in keys
	id   string // once accepted
	want string // its exact stdout
}

// program prints a value unique to i, computed by the payload.
func program(i int) (code, want string) {
	return fmt.Sprintf("n = %d\nprint(f'soak-{n}-{n * 7919 %% 104729}')\n", i),
		fmt.Sprintf("soak-%d-%d\n", i, i*7919%104729)
}

// clients returns one client per key.
func clients(s *server) [2]*client.Client {
	var cs [2]*client.Client
	for i, k := range keys {
		cs[i] = client.New(s.URL, client.WithAPIKey(k.key), client.WithTimeout(5*time.Minute))
	}
	return cs
}

// soak runs n executions at the given concurrency: even ones through the
// sync eval route, odd ones queued and polled, the keys alternating in
// pairs. It then reads every id back with its key (and with the other).
func soak(ctx context.Context, s *server, n, concurrency int) (bool, error) {
	cs := clients(s)
	jobs := make([]job, n)
	lat := make([]time.Duration, n)
	var wrong, failed, retries atomic.Int64
	var firstErr sync.Once
	report := func(format string, args ...any) {
		firstErr.Do(func() { fmt.Printf("  first problem: "+format+"\n", args...) })
	}
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				code, want := program(i)
				j := &jobs[i]
				j.key, j.want = (i/2)%2, want
				t := time.Now()
				r, tries, err := runOne(ctx, cs[j.key], code, nil, i%2 == 1)
				lat[i] = time.Since(t)
				retries.Add(int64(tries))
				if err != nil {
					failed.Add(1)
					report("execution %d: %v", i, err)
					continue
				}
				j.id = r.ExecutionID
				if r.Status != client.StatusCompleted || r.ExitCode != 0 || r.Stdout != want {
					wrong.Add(1)
					report("execution %d (%s): status %s exit %d stdout %q, want %q", i, r.ExecutionID, r.Status, r.ExitCode, r.Stdout, want)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)

	lost, leaked := readBack(ctx, cs, jobs, report)
	slices.Sort(lat)
	ok := wrong.Load() == 0 && failed.Load() == 0 && lost == 0 && leaked == 0
	fmt.Printf("soak: %d executions, concurrency %d, two keys, fork server and warm pool on\n\n", n, concurrency)
	fmt.Println("| executions | wrong | failed requests | lost ids | seen by the other key | 429 retries | time | per second | p50 | p99 | verdict |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	fmt.Printf("| %d | %d | %d | %d | %d | %d | %.0f s | %.1f | %d ms | %d ms | %s |\n", n, wrong.Load(), failed.Load(), lost, leaked,
		retries.Load(), elapsed.Seconds(), float64(n)/elapsed.Seconds(), pct(lat, 50).Milliseconds(), pct(lat, 99).Milliseconds(), verdict(ok))
	return ok, nil
}

// runOne runs code once, retrying while the server answers 429 or 503
// (a full queue is back-pressure, not a failure). cfg nil means the
// server's defaults. It returns the final result and how many retries it
// took.
func runOne(ctx context.Context, c *client.Client, code string, cfg *client.ExecutionConfig, async bool) (*client.ExecutionResult, int, error) {
	for tries := 0; ; tries++ {
		r, err := runOnce(ctx, c, code, cfg, async)
		var ae *client.APIError
		if errors.As(err, &ae) && (ae.StatusCode == http.StatusTooManyRequests || ae.StatusCode == http.StatusServiceUnavailable) && tries < 100 {
			time.Sleep(max(ae.RetryAfter/10, 50*time.Millisecond))
			continue
		}
		return r, tries, err
	}
}

func runOnce(ctx context.Context, c *client.Client, code string, cfg *client.ExecutionConfig, async bool) (*client.ExecutionResult, error) {
	if !async {
		return c.Eval(ctx, &client.SimpleExecRequest{Code: code, Config: cfg})
	}
	tar, err := client.TarFromMap(map[string]string{"main.py": code})
	if err != nil {
		return nil, err
	}
	id, err := c.ExecuteAsync(ctx, tar, &client.Metadata{Config: cfg})
	if err != nil {
		return nil, err
	}
	return c.WaitForCompletion(ctx, id, 20*time.Millisecond)
}

// readBack reads every accepted id with its key: it must be there, final
// and exact (lost otherwise). The other key must get 404 (leaked
// otherwise).
func readBack(ctx context.Context, cs [2]*client.Client, jobs []job, report func(string, ...any)) (lost, leaked int) {
	for _, j := range jobs {
		if j.id == "" {
			continue
		}
		r, err := cs[j.key].GetExecution(ctx, j.id)
		if err != nil || !final(r.Status) || (r.Status == client.StatusCompleted && r.Stdout != j.want) {
			lost++
			report("reading back %s: %v %+v", j.id, err, r)
		}
		_, err = cs[1-j.key].GetExecution(ctx, j.id)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound {
			leaked++
			report("the other key reading %s: %v", j.id, err)
		}
	}
	return lost, leaked
}

func final(s client.ExecutionStatus) bool {
	return s == client.StatusCompleted || s == client.StatusFailed || s == client.StatusKilled
}

// pct is the p-th percentile of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}
