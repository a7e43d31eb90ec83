package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// bare spawns python -c code, unsandboxed: the baseline.
func bare(ctx context.Context, python, code string) error {
	return exec.CommandContext(ctx, python, "-c", code).Run()
}

// bareStrict spawns python -I -S -c code: no site import, no user paths,
// the fastest way to start the interpreter, and so the strictest baseline.
func bareStrict(ctx context.Context, python, code string) error {
	return exec.CommandContext(ctx, python, "-I", "-S", "-c", code).Run()
}

// servers are the pyexec configurations compared: the default (fork
// servers), warm jails only (--fork-server=false) and no pool at all
// (--warm-pool=false, every jail built cold).
type servers struct {
	fork, jails, cold *server
}

// latencyPrint: print(1) spawned bare (python -I -S -c and python -c) vs
// through /api/v1/eval of each configuration, interleaved. The ratios are
// against the strict baseline; the second pyexec row repeats the fork
// server's against python -c.
func latencyPrint(ctx context.Context, s servers, python string, n int) ([]row, error) {
	var strict, b, f, j, c []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		if err := bareStrict(ctx, python, "print(1)"); err != nil {
			return nil, err
		}
		strict = append(strict, time.Since(t))
		t = time.Now()
		if err := bare(ctx, python, "print(1)"); err != nil {
			return nil, err
		}
		b = append(b, time.Since(t))
		for _, m := range []struct {
			s *server
			d *[]time.Duration
		}{{s.fork, &f}, {s.jails, &j}, {s.cold, &c}} {
			t = time.Now()
			if _, err := m.s.eval(ctx, "print(1)"); err != nil {
				return nil, err
			}
			*m.d = append(*m.d, time.Since(t))
		}
	}
	base := summarize("print(1): bare python -I -S -c", strict, nil)
	site := summarize("print(1): bare python -c", b, nil)
	return []row{base, site,
		summarize(p1Name, f, &base),
		summarize("print(1): pyexec, the same, against bare python -c", f, &site),
		summarize("print(1): pyexec, pool on, --fork-server=false (warm jails)", j, &base),
		summarize("print(1): pyexec, pool off (cold jail)", c, &base),
	}, nil
}

// p1Name and throughputName name the rows of targets P1 and P3
// (targets.go).
const (
	p1Name         = "print(1): pyexec /api/v1/eval, pool on (fork server)"
	throughputName = "throughput"
)

// latencyAsync: submit with /api/v1/exec/async, then wait for the result on
// the event stream.
func latencyAsync(ctx context.Context, s *server, n int) ([]row, error) {
	tarData, err := tarOf("main.py", "print(1)\n")
	if err != nil {
		return nil, err
	}
	var d []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		id, err := s.submit(ctx, tarData)
		if err != nil {
			return nil, err
		}
		if err := s.waitEvents(ctx, id); err != nil {
			return nil, err
		}
		d = append(d, time.Since(t))
	}
	return []row{summarize("async submit → final event", d, nil)}, nil
}

// throughputSlices is how many parts each side of a throughput level is
// cut into: bare -I -S, bare -c and pyexec alternate part by part, so that
// a load that comes and goes on a shared machine falls on all three alike.
const throughputSlices = 5

// throughput runs total print(1) executions at each concurrency level,
// bare (python -I -S -c, the row's baseline, and python -c, in a note) and
// through the API, interleaved in slices, and reports executions per
// second and the CPU time the whole machine (and the server process)
// spent per execution at each level.
func throughput(ctx context.Context, s *server, python string, total int, levels []int) ([]row, []string, error) {
	var rows []row
	var notes []string
	for _, c := range levels {
		sides, err := interleaved(s, c, total,
			func() error { return bareStrict(ctx, python, "print(1)") },
			func() error { return bare(ctx, python, "print(1)") },
			func() error { _, err := s.eval(ctx, "print(1)"); return err })
		if err != nil {
			return nil, nil, err
		}
		b, site, p := sides[0].perSec(), sides[1].perSec(), sides[2].perSec()
		rows = append(rows, row{name: fmt.Sprintf("%s c=%d: bare -I -S / pyexec (exec/s)", throughputName, c), rate: true, base: b, value: p})
		notes = append(notes, fmt.Sprintf("throughput at c=%d against bare python -c (%.1f/s): %.2f×", c, site, p/site),
			fmt.Sprintf("CPU per execution at c=%d: bare -I -S spawn %s (machine, busy %s); pyexec %s (machine, busy %s), of which the server process %s",
				c, sides[0].machinePer(), sides[0].busy(), sides[2].machinePer(), sides[2].busy(), sides[2].serverPer()))
	}
	return rows, notes, nil
}

// side is what one side of a throughput level measured.
type side struct {
	took, mcpu, scpu time.Duration
	n                int
}

func (d side) perSec() float64    { return float64(d.n) / d.took.Seconds() }
func (d side) machinePer() string { return ms(d.mcpu / time.Duration(d.n)) }
func (d side) serverPer() string  { return ms(d.scpu / time.Duration(d.n)) }

// busy is the share of the machine's processors busy over the side's
// slices: throughput × CPU per execution ÷ processors. Where a side runs
// below 100 %, its executions waited on something other than the CPU.
func (d side) busy() string {
	return fmt.Sprintf("%.1f %%", 100*d.mcpu.Seconds()/(d.took.Seconds()*float64(runtime.NumCPU())))
}

// interleaved runs total executions of each side at concurrency c, the
// sides taking turns part by part, and measures each side's time, the
// CPU time of the whole machine and that of the server s.
func interleaved(s *server, c, total int, runs ...func() error) ([]side, error) {
	sides := make([]side, len(runs))
	part := max(1, total/throughputSlices)
	for i := 0; i < throughputSlices; i++ {
		for k, run := range runs {
			m0, s0, t := machineCPU(), s.cpu(), time.Now()
			if err := rate(c, part, run); err != nil {
				return nil, err
			}
			sides[k].took += time.Since(t)
			sides[k].mcpu += machineCPU() - m0
			sides[k].scpu += s.cpu() - s0
			sides[k].n += part
		}
	}
	return sides, nil
}

// machineCPU is the CPU time all processors spent outside idle and iowait
// so far (/proc/stat).
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var ticks int64
	for i, f := range strings.Fields(line)[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		v, _ := strconv.ParseInt(f, 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

func rate(workers, total int, f func() error) error {
	var wg sync.WaitGroup
	jobs := make(chan struct{}, total)
	for i := 0; i < total; i++ {
		jobs <- struct{}{}
	}
	close(jobs)
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if err := f(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (s *server) submit(ctx context.Context, tarData []byte) (string, error) {
	body, ctype, err := multipartBody(tarData, `{"entrypoint":"main.py"}`)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/v1/exec/async", body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("submit: HTTP %d", resp.StatusCode)
	}
	var r result
	return r.ID, json.NewDecoder(resp.Body).Decode(&r)
}

// waitEvents reads the NDJSON event stream until the final status.
func (s *server) waitEvents(ctx context.Context, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/executions/"+id+"/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct{ Type, Data string }
		if err := dec.Decode(&ev); err != nil {
			return fmt.Errorf("events of %s: %w", id, err)
		}
		if ev.Type == "status" && (ev.Data == "completed" || ev.Data == "failed" || ev.Data == "killed") {
			if ev.Data != "completed" {
				return fmt.Errorf("%s ended %s", id, ev.Data)
			}
			return nil
		}
	}
}
