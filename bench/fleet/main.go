// Command fleet measures how the throughput of `print(1)` grows with the
// nodes of a fleet: it starts a three-server NATS JetStream cluster in
// process (clustered on loopback), then for each node count of -nodes
// starts that many `pyexec serve --nats` processes, each connected to its
// own NATS server, and runs -n executions through -clients concurrent
// clients spread over the nodes — async (submit, then wait for the final
// state) and sync (POST /api/v1/eval). It prints executions per second,
// the ratio against the first node count, and per node the CPU seconds
// of the server process (/proc/<pid>/stat) and of its jails (its cgroup
// parent's usage) divided by the executions of the whole row: the sum
// over the nodes is what one execution costs the fleet. It is a measurement tool, not a
// test; it needs root (jails).
//
//	go build -o bin/pyexec ./cmd/pyexec
//	go run ./bench/fleet -pyexec bin/pyexec -nodes 1,2,3 -n 200
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pyexec/pyexec/client"
	"github.com/pyexec/pyexec/internal/testserver"
)

func main() {
	os.Exit(run())
}

func run() int {
	binary := flag.String("pyexec", "bin/pyexec", "pyexec binary to measure")
	nodeList := flag.String("nodes", "1,2,3", "node counts, comma separated, each at most 3; the first is the baseline")
	n := flag.Int("n", 200, "executions per mode and node count")
	clients := flag.Int("clients", 12, "concurrent clients")
	concurrency := flag.Int("max-concurrency", 0, "each node's --max-concurrency; 0: the server's default (its CPUs)")
	flag.Parse()

	var counts []int
	for f := range strings.SplitSeq(*nodeList, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 || k > 3 {
			fmt.Fprintf(os.Stderr, "fleet: bad node count %q (1-3)\n", f)
			return 2
		}
		counts = append(counts, k)
	}
	bin, err := filepath.Abs(*binary)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()

	cluster, err := testserver.StartCluster("pyexec-bench", 3, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	defer cluster.Close()

	fmt.Printf("print(1), %d executions per row, %d clients, NATS cluster of 3 in process, R3 store\n\n", *n, *clients)
	fmt.Println("| mode | nodes | exec/s | vs first | server CPU s per execution, by node | jail CPU s per execution, by node | errors |")
	fmt.Println("|---|---|---|---|---|---|---|")
	base := map[string]float64{}
	for _, k := range counts {
		rows, err := measure(ctx, bin, cluster.URLs(), k, *n, *clients, *concurrency)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fleet: %d nodes: %v\n", k, err)
			return 1
		}
		for _, r := range rows {
			if _, ok := base[r.mode]; !ok {
				base[r.mode] = r.rate
			}
			fmt.Printf("| %s | %d | %.1f | %.2f× | %s | %s | %d |\n", r.mode, k, r.rate, r.rate/base[r.mode],
				perNode(r.serverCPU, r.done), perNode(r.jailCPU, r.done), r.errors)
		}
	}
	return 0
}

// row is one measured mode on one fleet.
type row struct {
	mode      string
	rate      float64 // executions per second
	done      int     // executions that completed
	errors    int
	serverCPU []float64 // seconds, per node
	jailCPU   []float64 // seconds, per node; negative when unknown
}

func perNode(cpu []float64, done int) string {
	var parts []string
	for _, c := range cpu {
		if c < 0 || done == 0 {
			parts = append(parts, "n/a")
			continue
		}
		parts = append(parts, fmt.Sprintf("%.4f", c/float64(done)))
	}
	return strings.Join(parts, " / ")
}

// measure starts k nodes, warms them up and runs both modes.
func measure(ctx context.Context, bin string, urls []string, k, n, clients, concurrency int) ([]row, error) {
	var nodes []*node
	defer func() {
		for _, nd := range nodes {
			if err := nd.srv.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "fleet: stopping a node:", err)
			}
			// The stopped server left its (empty) cgroup parent.
			_ = testserver.RemoveCgroups(nd.parent)
		}
	}()
	for i := range k {
		name := string(rune('a' + i))
		parent := fmt.Sprintf("pyexec-fleetbench-%d-%s", os.Getpid(), name)
		flags := []string{"--nats", urls[i], "--node-name", name, "--prepare-base=false", "--provision-tools=false",
			"--queue-size", "1000", "--log-level", "warn"}
		if concurrency > 0 {
			flags = append(flags, "--max-concurrency", strconv.Itoa(concurrency))
		}
		srv, err := testserver.RunInNewDir(ctx, "pyexec-fleetbench-", testserver.Config{Binary: bin, CgroupParent: parent, Flags: flags})
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, &node{srv: srv, parent: parent})
	}
	// Warm up every node's pool and fork server with sync runs of its own.
	for _, nd := range nodes {
		c := client.New(nd.srv.URL, client.WithTimeout(time.Minute))
		for range 5 {
			if _, err := c.Eval(ctx, &client.SimpleExecRequest{Code: "print(1)"}); err != nil {
				return nil, fmt.Errorf("warming up: %w", err)
			}
		}
	}
	var rows []row
	for _, mode := range []string{"async", "sync"} {
		r, err := runMode(ctx, mode, nodes, n, clients)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// node is one `pyexec serve` of the fleet.
type node struct {
	srv    *testserver.Server
	parent string // its --cgroup-parent, for the jails' CPU
}

// cpu returns the server process's CPU seconds and its jails' (-1 when
// their cgroup is not found).
func (nd *node) cpu() (float64, float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", nd.srv.Pid()))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command (which may hold spaces) start after ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, 0, errors.New("short /proc stat")
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	const ticks = 100 // USER_HZ on Linux
	jail := -1.0
	for _, dir := range testserver.CgroupDirsNamed(nd.parent) {
		if s, err := cgroupCPU(dir); err == nil {
			jail = s
		}
	}
	return (utime + stime) / ticks, jail, nil
}

// cgroupCPU is the CPU seconds a cgroup used: usage_usec of cpu.stat on
// cgroup v2, cpuacct.usage (nanoseconds) on v1; an error in a directory
// that has neither (another v1 hierarchy).
func cgroupCPU(dir string) (float64, error) {
	if b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage")); err == nil {
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return float64(ns) / 1e9, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "usage_usec "); ok {
			usec, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			return float64(usec) / 1e6, err
		}
	}
	return 0, errors.New("no CPU usage in " + dir)
}

// runMode runs n executions of print(1) through clients concurrent
// clients, round-robin over the nodes, and measures the rate and CPU.
func runMode(ctx context.Context, mode string, nodes []*node, n, clients int) (row, error) {
	before := make([][2]float64, len(nodes))
	for i, nd := range nodes {
		s, j, err := nd.cpu()
		if err != nil {
			return row{}, err
		}
		before[i] = [2]float64{s, j}
	}
	var next, done, failed atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				c := client.New(nodes[(int(i)+w)%len(nodes)].srv.URL, client.WithTimeout(2*time.Minute))
				if ok := runOne(ctx, c, mode); ok {
					done.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	r := row{mode: mode, done: int(done.Load()), errors: int(failed.Load()), rate: float64(done.Load()) / elapsed.Seconds()}
	for i, nd := range nodes {
		s, j, err := nd.cpu()
		if err != nil {
			return row{}, err
		}
		r.serverCPU = append(r.serverCPU, s-before[i][0])
		if j < 0 || before[i][1] < 0 {
			r.jailCPU = append(r.jailCPU, -1)
		} else {
			r.jailCPU = append(r.jailCPU, j-before[i][1])
		}
	}
	return r, nil
}

// runOne runs print(1) once and reports whether it completed.
func runOne(ctx context.Context, c *client.Client, mode string) bool {
	if mode == "sync" {
		r, err := c.Eval(ctx, &client.SimpleExecRequest{Code: "print(1)"})
		return err == nil && r.Status == client.StatusCompleted
	}
	tar, err := client.TarFromMap(map[string]string{"main.py": "print(1)\n"})
	if err != nil {
		return false
	}
	id, err := c.ExecuteAsync(ctx, tar, nil)
	if err != nil {
		return false
	}
	r, err := c.WaitForCompletion(ctx, id, 20*time.Millisecond)
	return err == nil && r.Status == client.StatusCompleted
}
