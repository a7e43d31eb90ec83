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
		t0 := time.Now()
		if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(t0))
		t0 = time.Now()
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
		t0 := time.Now()
		if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(t0))
		t0 = time.Now()
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

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
