package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pyexec/pyexec/client"
)

// crashRounds kills the server with SIGKILL rounds times while a loop
// submits async executions, restarting it on the same data directory each
// time, and checks what the issue asks: every accepted id reaches a final
// state (completed ones exact), the jails die with their server, and the
// next server sweeps what the previous one left.
func crashRounds(ctx context.Context, binary string, rounds int) (bool, error) {
	s, err := newServer(binary)
	if err != nil {
		return false, err
	}
	defer s.remove()
	var (
		accepted            []job
		orphans, oldCgroups int
		lost, wrong         int
		killedMidRun        int
		maxDie, maxSettle   time.Duration
	)
	if err := s.Start(ctx); err != nil {
		return false, err
	}
	for round := range rounds {
		jobs, running := submitUntilCrash(ctx, s, round)
		accepted = append(accepted, jobs...)
		killedMidRun += running
		// The jails must die with the server that ran them.
		took, gone := waitFor(10*time.Second, func() bool { return len(s.jailProcesses()) == 0 })
		maxDie = max(maxDie, took)
		if !gone {
			left := s.jailProcesses()
			orphans += len(left)
			for _, p := range left {
				fmt.Println("  orphan after kill -9:", p)
			}
			killAll(left)
		}
		// Whatever jail cgroups the killed server left, the next one sweeps.
		before := s.jailCgroups()
		fmt.Printf("  round %d: the killed server left %d jail cgroups\n", round+1, len(before))
		if err := s.Start(ctx); err != nil {
			return false, err
		}
		// The new server sweeps what the killed one left.
		if _, swept := waitFor(10*time.Second, func() bool { return !slices.ContainsFunc(before, exists) }); !swept {
			for _, d := range before {
				if exists(d) {
					oldCgroups++
					fmt.Println("  cgroup of the killed server still there:", d)
				}
			}
		}
		// Every id accepted so far must reach a final state.
		settled := time.Now()
		l, w, err := settle(ctx, s, accepted)
		if err != nil {
			s.Crash()
			return false, err
		}
		maxSettle = max(maxSettle, time.Since(settled))
		lost, wrong = lost+l, wrong+w
	}
	if err := s.Stop(); err != nil {
		return false, err
	}
	ok := orphans == 0 && oldCgroups == 0 && lost == 0 && wrong == 0
	fmt.Printf("kill -9: %d rounds of SIGKILL during an async submit loop, restart on the same data directory\n\n", rounds)
	fmt.Println("| rounds | accepted ids | running at a kill | lost | wrong | orphan processes | cgroups not swept | jails gone after kill (max) | all final after restart (max) | verdict |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	fmt.Printf("| %d | %d | %d | %d | %d | %d | %d | %.1f s | %.1f s | %s |\n", rounds, len(accepted), killedMidRun, lost, wrong,
		orphans, oldCgroups, maxDie.Seconds(), maxSettle.Seconds(), verdict(ok))
	return checkClean(s) && ok, nil
}

// submitUntilCrash submits async executions from both keys until a random
// moment 1 to 3 s in, when it kills the server. It returns the accepted
// executions and how many of them were running at the kill.
func submitUntilCrash(ctx context.Context, s *server, round int) ([]job, int) {
	cs := clients(s)
	var (
		mu      sync.Mutex
		jobs    []job
		refused atomic.Int64
		killed  atomic.Bool
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := (round*1_000_000 + w*100_000 + i)
				code, want := program(n)
				// Some runs last long enough to be killed mid-run.
				code = "import time\ntime.sleep(0.3)\n" + code
				tar, err := client.TarFromMap(map[string]string{"main.py": code})
				if err != nil {
					return
				}
				k := (w + i) % 2
				id, err := cs[k].ExecuteAsync(ctx, tar, &client.Metadata{})
				if err != nil {
					if !killed.Load() && refused.Add(1) == 1 {
						// refused by the live server: never accepted
						fmt.Printf("  round %d: first refused submit: %v\n", round+1, err)
					}
					continue
				}
				mu.Lock()
				jobs = append(jobs, job{key: k, id: id, want: want})
				mu.Unlock()
			}
		})
	}
	time.Sleep(time.Second + rand.N(2*time.Second))
	running := 0
	mu.Lock()
	for _, j := range jobs {
		if r, err := cs[j.key].GetExecution(ctx, j.id); err == nil && r.Status == client.StatusRunning {
			running++
		}
	}
	mu.Unlock()
	killed.Store(true)
	s.Crash()
	close(stop)
	wg.Wait()
	fmt.Printf("  round %d: %d accepted, %d refused before the kill, %d running at the kill\n", round+1, len(jobs), refused.Load(), running)
	return jobs, running
}

// settle waits until every job is final, reading each with its key. A
// job that is gone (404) is lost; a completed one with other output is
// wrong. A run the kill cut short is failed (node_lost): final, not lost.
func settle(ctx context.Context, s *server, jobs []job) (lost, wrong int, err error) {
	cs := clients(s)
	deadline := time.Now().Add(5 * time.Minute)
	for _, j := range jobs {
		for {
			r, err := cs[j.key].GetExecution(ctx, j.id)
			var ae *client.APIError
			if errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound {
				lost++
				fmt.Println("  lost:", j.id)
				break
			}
			if err == nil && final(r.Status) {
				if r.Status == client.StatusCompleted && r.Stdout != j.want {
					wrong++
					fmt.Printf("  wrong: %s stdout %q, want %q\n", j.id, r.Stdout, j.want)
				}
				break
			}
			if time.Now().After(deadline) {
				return lost, wrong, fmt.Errorf("%s not final 5 minutes after the restart (%v)", j.id, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return lost, wrong, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// killAll kills processes listed as "pid command line", so that a failed
// round does not leave them running on the machine.
func killAll(procs []string) {
	for _, p := range procs {
		var pid int
		if _, err := fmt.Sscan(p, &pid); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
