package sandbox

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// BenchmarkJailOverhead measures what the jail adds to the cheapest Python
// run: a sandboxed `python3 -I -S -c pass` against the same command spawned
// bare, interleaved so both see the same machine load. It reports medians
// in ms, the overhead, and the ratio jail/bare.
//
//	go test -run '^$' -bench JailOverhead -benchtime 200x ./internal/sandbox
func BenchmarkJailOverhead(b *testing.B) {
	m := needJail(b)
	argv := []string{python, "-I", "-S", "-c", "pass"}
	spec := Spec{Argv: argv}
	var bare, jail []time.Duration
	for b.Loop() {
		bare = append(bare, spawnBare(b, argv))
		t0 := time.Now()
		r, err := m.Run(context.Background(), spec, nil)
		if err != nil || r.Status != StatusOK {
			b.Fatalf("jail run: %v %s %s", err, r.Status, r.Reason)
		}
		jail = append(jail, time.Since(t0))
	}
	mb, mj := median(bare), median(jail)
	b.ReportMetric(ms(mb), "bare-ms")
	b.ReportMetric(ms(mj), "jail-ms")
	b.ReportMetric(ms(mj-mb), "overhead-ms")
	b.ReportMetric(float64(mj)/float64(mb), "ratio")
}

// BenchmarkPreparedJail measures the hand-off cost when the jail was built
// ahead of time (what a warm pool pays per execution), against bare.
//
//	go test -run '^$' -bench PreparedJail -benchtime 200x ./internal/sandbox
func BenchmarkPreparedJail(b *testing.B) {
	m := needJail(b)
	argv := []string{python, "-I", "-S", "-c", "pass"}
	spec := Spec{Argv: argv}
	var bare, warm []time.Duration
	for b.Loop() {
		b.StopTimer()
		j, err := m.Prepare(context.Background(), Base{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		bare = append(bare, spawnBare(b, argv))
		t0 := time.Now()
		r, err := j.Run(context.Background(), spec, nil)
		if err != nil || r.Status != StatusOK {
			b.Fatalf("jail run: %v %s %s", err, r.Status, r.Reason)
		}
		warm = append(warm, time.Since(t0))
		b.StopTimer()
		j.Close()
		b.StartTimer()
	}
	mb, mw := median(bare), median(warm)
	b.ReportMetric(ms(mb), "bare-ms")
	b.ReportMetric(ms(mw), "prepared-ms")
	b.ReportMetric(ms(mw-mb), "overhead-ms")
	b.ReportMetric(float64(mw)/float64(mb), "ratio")
}

// spawnBare runs argv unsandboxed and returns how long it took.
func spawnBare(b *testing.B, argv []string) time.Duration {
	b.Helper()
	t0 := time.Now()
	if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkForkedExecution measures an execution forked from a fork
// server: the fork (what the pool pays ahead of time, off the request's
// path) and the hand-off of `pass` until its Result (what a request pays),
// against a bare `python3 -I -S -c pass`.
//
//	go test -run '^$' -bench ForkedExecution -benchtime 200x ./internal/sandbox
func BenchmarkForkedExecution(b *testing.B) {
	m := needJail(b)
	tpl := startTemplate(b, m)
	argv := []string{python, "-I", "-S", "-c", "pass"}
	spec := Spec{Argv: []string{python}, Env: testEnv, Requests: true}
	var bare, fork, run []time.Duration
	for b.Loop() {
		bare = append(bare, spawnBare(b, argv))
		t0 := time.Now()
		j, p, err := tpl.Fork(context.Background(), spec, nil)
		if err != nil {
			b.Fatal(err)
		}
		fork = append(fork, time.Since(t0))
		t0 = time.Now()
		if r := handOff(b, p, Spec{}, "pass"); r.Status != StatusOK {
			b.Fatalf("forked run: %s %s %s", r.Status, r.Reason, r.Stderr)
		}
		run = append(run, time.Since(t0))
		m.Release(j)
	}
	mb, mf, mr := median(bare), median(fork), median(run)
	b.ReportMetric(ms(mb), "bare-ms")
	b.ReportMetric(ms(mf), "fork-ms")
	b.ReportMetric(ms(mr), "handoff-to-result-ms")
	b.ReportMetric(float64(mr)/float64(mb), "ratio")
}
