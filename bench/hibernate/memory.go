package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/testserver"
)

// mem is one reading of what the sessions hold.
type mem struct {
	// sessions is the sum of the sessions' memory_bytes; bigs that of the
	// large ones alone.
	sessions, bigs int64
	// parent is the usage of the cgroup parent (every jail: sessions,
	// fork servers, kernels forked ahead); rss and cache its memory.stat.
	parent, rss, cache int64
	// server is the server process's resident set; store the size of its
	// data directory's store (where snapshots go) on disk.
	server, store int64
	// metrics are the server's /metrics gauges of metricNames.
	metrics           map[string]int64
	hibernated, awake int
	err               error
}

// memoryCgroup is the cgroup parent's directory in the memory hierarchy
// (v1) or the v2 tree.
func memoryCgroup(parent string) string {
	for _, d := range testserver.CgroupDirsNamed(parent) {
		if strings.HasPrefix(d, "/sys/fs/cgroup/memory/") || fileExists(filepath.Join(d, "memory.current")) {
			return d
		}
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func (b *bench) memory(ctx context.Context) mem {
	var m mem
	list, err := b.px.ListSessions(ctx)
	if err != nil {
		m.err = err
		return m
	}
	for _, s := range list {
		m.sessions += s.MemoryBytes
		if slices.Contains(b.big, s.SessionID) {
			m.bigs += s.MemoryBytes
		}
		if s.State == "hibernated" {
			m.hibernated++
		} else {
			m.awake++
		}
	}
	if b.cg == "" {
		b.cg = memoryCgroup(b.srv.CgroupParent)
	}
	if b.cg != "" {
		m.parent = readInt(filepath.Join(b.cg, "memory.usage_in_bytes"))
		if m.parent == 0 {
			m.parent = readInt(filepath.Join(b.cg, "memory.current"))
		}
		stat, _ := os.ReadFile(filepath.Join(b.cg, "memory.stat"))
		for line := range strings.SplitSeq(string(stat), "\n") {
			k, v, _ := strings.Cut(line, " ")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "total_rss", "anon":
				m.rss = n
			case "total_cache", "file":
				m.cache = n
			}
		}
	}
	all, err := b.srv.Metrics(ctx)
	if err != nil {
		m.err = err
	}
	m.metrics = map[string]int64{}
	for _, name := range metricNames {
		m.metrics[name] = int64(all[name])
	}
	m.server, _ = b.srv.RSS()
	m.store = dirBytes(filepath.Join(b.srv.Dir, "nats"))
	return m
}

// metricNames are the gauges read from /metrics: what the fork servers
// and the kernels forked ahead hold (jails under the cgroup parent that
// are not sessions), and the Go heap of the server (where its RSS goes).
var metricNames = []string{"pyexec_pool_fork_server_memory_bytes", "pyexec_pool_forked_memory_bytes",
	"go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes"}

func readInt(p string) int64 {
	s, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(s)), 10, 64)
	return n
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func mib(v int64) string { return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// report renders the run as markdown.
func (b *bench) report(created, allAsleep time.Duration, slept int, idle, awake, asleep mem, lingered, afterGC *mem, resumed mem,
	before, first, after map[string][]time.Duration) string {
	var o strings.Builder
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&o, "%d small sessions (%d MiB array each) + %d large (%d MiB DataFrame each); --session-hibernate-after %d s; "+
		"created with their state in %s; all %d hibernated %s after the last cell; load average %s\n\n",
		b.n, b.smalMB, b.k, b.mb, b.after, created.Round(100*time.Millisecond), slept,
		allAsleep.Round(100*time.Millisecond), strings.Join(strings.Fields(string(load))[:3], " "))
	var gcHead, gcRule string
	if lingered != nil {
		gcHead, gcRule = fmt.Sprintf(" hibernated, %s later |", b.linger), "---|"
	}
	if afterGC != nil {
		gcHead, gcRule = gcHead+" hibernated, after two forced GCs of the server |", gcRule+"---|"
	}
	fmt.Fprintf(&o, "| memory | no session | awake | hibernated | hibernated / awake |%s after resuming the large ones |\n|---|---|---|---|---|---|%s\n",
		gcHead, gcRule)
	row := func(name string, f func(mem) int64, base bool) {
		i := "–"
		if base {
			i = mib(f(idle))
		}
		gc := ""
		for _, m := range []*mem{lingered, afterGC} {
			if m != nil {
				gc += " " + mib(f(*m)) + " |"
			}
		}
		fmt.Fprintf(&o, "| %s | %s | %s | %s | %s |%s %s |\n", name, i, mib(f(awake)), mib(f(asleep)),
			ratio(float64(f(asleep)), float64(f(awake))), gc, mib(f(resumed)))
	}
	row("sessions' `memory_bytes`, sum", func(m mem) int64 { return m.sessions }, true)
	row("… of the large sessions", func(m mem) int64 { return m.bigs }, false)
	row("jails' cgroup parent, usage", func(m mem) int64 { return m.parent }, true)
	row("… rss", func(m mem) int64 { return m.rss }, true)
	row("… cache", func(m mem) int64 { return m.cache }, true)
	row("… less fork servers and kernels forked ahead", func(m mem) int64 {
		return m.parent - m.metrics["pyexec_pool_fork_server_memory_bytes"] - m.metrics["pyexec_pool_forked_memory_bytes"]
	}, true)
	row("server process RSS", func(m mem) int64 { return m.server }, true)
	row("… Go heap in use", func(m mem) int64 { return m.metrics["go_memstats_heap_inuse_bytes"] }, true)
	row("… Go heap idle, not returned to the OS", func(m mem) int64 {
		return m.metrics["go_memstats_heap_idle_bytes"] - m.metrics["go_memstats_heap_released_bytes"]
	}, true)
	row("store on disk (not memory)", func(m mem) int64 { return m.store }, true)

	base := p50(before[cellScan])
	o.WriteString("\n| call | p50 | max | n | vs before hibernation (p50) | target |\n|---|---|---|---|---|---|\n")
	line := func(name string, d []time.Duration, vs time.Duration, target string) {
		v := "–"
		if vs > 0 {
			v = ratio(float64(p50(d)), float64(vs))
		}
		fmt.Fprintf(&o, "| %s | %s | %s | %d | %s | %s |\n", name, ms(p50(d)), ms(slices.Max(d)), len(d), v, target)
	}
	line(fmt.Sprintf("large session, before: `%s`", cellTrivia), before[cellTrivia], 0, "")
	line(fmt.Sprintf("large session, before: `%s`", cellScan), before[cellScan], 0, "")
	line("**first call after hibernation, large** (resume + `df.values.sum()`, value checked)", first["big"], base, "≤ 1 s")
	if len(first["small"]) > 0 {
		line("first call after hibernation, small (resume, value checked)", first["small"], 0, "")
	}
	line(fmt.Sprintf("large session, later: `%s`", cellTrivia), after[cellTrivia], p50(before[cellTrivia]), "≈ 1×")
	line(fmt.Sprintf("large session, later: `%s`", cellScan), after[cellScan], base, "≈ 1×")
	return o.String()
}
