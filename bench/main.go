// Command bench measures pyexec against bare Python on the same machine in
// the same run, interleaved, and prints a markdown table of percentiles and
// ratios. It starts its own `pyexec serve` (the binary given by -pyexec) on
// a loopback port with a temporary data dir. It is a measurement tool, not
// a test: nothing here gates CI.
//
//	make bench            # or: go run ./bench -pyexec bin/pyexec -n 100
package main

import (
	"context"
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
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	srv, err := startServer(ctx, *binary)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer srv.stop()
	python, err := srv.interpreter(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
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
	if !add(latencyPrint(ctx, srv, python, *n)) ||
		!add(latencyAsync(ctx, srv, *n)) ||
		!add(throughput(ctx, srv, python, *total, []int{1, 2, 8, 32})) {
		return 1
	}
	sessionRows, notes, err := sessionCells(ctx, srv, *n)
	if !add(sessionRows, err) {
		return 1
	}
	// The DataFrame scenario needs PyPI for pandas: without it, the
	// report says so and goes on.
	if r, err := latencyFrameHTML(ctx, srv, max(5, *n/5)); err != nil {
		fmt.Fprintln(os.Stderr, "bench: DataFrame → HTML skipped:", err)
	} else {
		rows = append(rows, r...)
	}
	pool, err := srv.poolCounters(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	mem, err := srv.rssBytes()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}

	fmt.Printf("pyexec benchmark — %s, interpreter %s, %d iterations\n\n", time.Now().UTC().Format(time.RFC3339), python, *n)
	fmt.Println(renderTable(rows))
	for _, note := range notes {
		fmt.Println("note: " + note)
	}
	fmt.Printf("\nserver RSS after the run: %.1f MiB\n", float64(mem)/(1<<20))
	fmt.Printf("warm pool: %s\n", pool)
	fmt.Println("\ncommand: " + strings.Join(os.Args, " "))
	return 0
}
