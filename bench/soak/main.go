// Command soak re-runs the whole-service checks of issue #20 against a real
// `pyexec serve` (two API keys, fork server and warm pool on):
//
//   - soak: -n executions at -concurrency, alternating keys and sync/async,
//     each printing a value unique to it; every result must be exact, every
//     id must still be readable by its key afterwards (0 lost) and by no
//     other key.
//   - crash: -rounds times, SIGKILL the server during a loop of async
//     submits, check that its jail processes die with it, restart it on the
//     same data directory and wait until every id ever accepted has a final
//     state (0 lost, 0 wrong); the previous server's jail cgroups must be
//     gone after the restart, and nothing at all after a final SIGTERM.
//   - evasion: programs that try to outlive their timeout (SIGTERM ignored,
//     setsid + double fork, fork loop, ctypes loops with signals blocked, a
//     SIGSTOPped child) must end within timeout + 0.2 s with none of their
//     processes left.
//
// It prints one table per phase and exits 1 when a check fails. It is a
// measurement tool, not a test; it needs root (jails, cgroups).
//
//	go build -o bin/pyexec ./cmd/pyexec
//	go run ./bench/soak -pyexec bin/pyexec -n 10000 -rounds 20
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
	binary := flag.String("pyexec", "bin/pyexec", "pyexec binary to check")
	n := flag.Int("n", 10000, "executions of the soak")
	concurrency := flag.Int("concurrency", 16, "soak clients at once")
	rounds := flag.Int("rounds", 20, "kill -9 rounds")
	phases := flag.String("phases", "soak,crash,evasion", "phases to run, comma separated")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "soak: needs root (jails and cgroups)")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()

	ok := true
	for p := range strings.SplitSeq(*phases, ",") {
		var (
			passed bool
			err    error
		)
		switch strings.TrimSpace(p) {
		case "soak":
			passed, err = withServer(ctx, *binary, func(s *server) (bool, error) { return soak(ctx, s, *n, *concurrency) })
		case "crash":
			passed, err = crashRounds(ctx, *binary, *rounds)
		case "evasion":
			passed, err = withServer(ctx, *binary, func(s *server) (bool, error) { return evasion(ctx, s) })
		default:
			err = fmt.Errorf("unknown phase %q", p)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "soak: %s: %v\n", p, err)
			return 1
		}
		ok = ok && passed
		fmt.Println()
	}
	if !ok {
		fmt.Println("FAILED: see the rows marked FAIL")
		return 1
	}
	fmt.Println("all checks passed")
	return 0
}

// withServer runs fn against a fresh server, then stops it and checks
// that it left no jail process or cgroup behind.
func withServer(ctx context.Context, binary string, fn func(*server) (bool, error)) (bool, error) {
	s, err := newServer(binary)
	if err != nil {
		return false, err
	}
	defer s.remove()
	if err := s.Start(ctx); err != nil {
		return false, err
	}
	passed, err := fn(s)
	if serr := s.Stop(); err == nil {
		err = serr
	}
	if err != nil {
		return false, err
	}
	return checkClean(s) && passed, nil
}

// checkClean reports what a stopped server left behind.
func checkClean(s *server) bool {
	procs, cgroups := s.jailProcesses(), s.jailCgroups()
	fmt.Printf("after SIGTERM: %d jail processes, %d jail cgroups left %s\n", len(procs), len(cgroups),
		verdict(len(procs) == 0 && len(cgroups) == 0))
	for _, p := range append(procs, cgroups...) {
		fmt.Println("  left:", p)
	}
	return len(procs) == 0 && len(cgroups) == 0
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}
