package pool

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// waitWarm waits until p has n jails ready.
func waitWarm(t *testing.T, p *Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for p.Stats().Warm != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d warm jails after a minute, want %d: %+v", p.Stats().Warm, n, p.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slowRun starts an execution that prints "started", sleeps 1.5 s and
// prints "slept"; it returns once the payload is running, and where its
// result arrives.
func slowRun(t *testing.T, p *Pool) <-chan sandbox.Result {
	t.Helper()
	started := make(chan struct{})
	var once sync.Once
	done := make(chan sandbox.Result, 1)
	go func() {
		res, _ := p.Run(context.Background(), spec("import time\nprint('started', flush=True)\ntime.sleep(1.5)\nprint('slept')"),
			func(sandbox.Stream, []byte) { once.Do(func() { close(started) }) })
		done <- res
	}()
	select {
	case <-started:
	case res := <-done:
		t.Fatalf("ended without output: %s %q", res.Status, res.Stderr)
	case <-time.After(time.Minute):
		t.Fatal("no output after a minute")
	}
	return done
}

func checkSlept(t *testing.T, res sandbox.Result) {
	t.Helper()
	if res.Status != sandbox.StatusOK || string(res.Stdout) != "started\nslept\n" {
		t.Fatalf("status %s stdout %q stderr %s", res.Status, res.Stdout, res.Stderr)
	}
}

// TestRefillWaitsWhileASpareIsReady: an execution that leaves its kind a
// ready spare does not share the CPU with its own refill: the pool builds
// the replacement once the execution has ended.
func TestRefillWaitsWhileASpareIsReady(t *testing.T) {
	p := newPool(t, Config{ForkServer: true})
	warmUp(t, p, spec("print('ok')"))
	waitWarm(t, p, 2) // the first run found none ready: the kind keeps two

	done := slowRun(t, p)
	until := time.Now().Add(time.Second)
	for time.Now().Before(until) {
		if n := p.Stats().Warm; n != 1 {
			t.Fatalf("%d warm jails while the execution runs, want the 1 spare: the refill did not wait", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkSlept(t, <-done)
	waitWarm(t, p, 2) // refilled once it ended
}

// TestRefillOfTheLastReadyIsAtOnce: taking a kind's last ready jail
// refills it while the execution runs, for the next request.
func TestRefillOfTheLastReadyIsAtOnce(t *testing.T) {
	p := newPool(t, Config{ForkServer: true, Max: 1}) // never a spare
	warmUp(t, p, spec("print('ok')"))
	waitWarm(t, p, 1)

	done := slowRun(t, p)
	waitWarm(t, p, 1) // replaced
	select {
	case res := <-done:
		t.Fatalf("the execution ended (%s) before its kind was refilled: the refill waited", res.Status)
	default:
	}
	checkSlept(t, <-done)
}

// readyByKind is how many jails each kind has ready, fewest first.
func readyByKind(p *Pool) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n []int
	for _, k := range p.kinds {
		n = append(n, len(k.ready))
	}
	slices.Sort(n)
	return n
}

// waitReadyByKind waits, at most two minutes after what happened, until
// the kinds of p have want ready (as readyByKind counts them).
func waitReadyByKind(t *testing.T, p *Pool, want []int, after string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !slices.Equal(readyByKind(p), want) {
		if time.Now().After(deadline) {
			t.Fatalf("ready by kind %v two minutes after %s, want %v", readyByKind(p), after, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKindsInDemandShareTheWarmPlaces: a kind that took every warm place
// (MaxWarm) gives one up to a kind that comes into use after it, so that
// both keep one ready; neither then takes it back. Before, the second
// kind had none ready, and each of its requests forked on its path.
func TestKindsInDemandShareTheWarmPlaces(t *testing.T) {
	p := newPool(t, Config{ForkServer: true, MaxWarm: 2})
	a := spec("print('a')\n")
	b := spec("print('b')\n")
	b.Collect = &sandbox.Collect{} // another kind, the same fork server
	warmUp(t, p, a)
	waitWarm(t, p, 2) // the first run found none ready: the kind keeps two
	if got := readyByKind(p); !slices.Equal(got, []int{2}) {
		t.Fatalf("ready by kind %v, want [2]", got)
	}

	if res := run(t, p, b); res.Status != sandbox.StatusOK || string(res.Stdout) != "b\n" {
		t.Fatalf("status %s stdout %q", res.Status, res.Stdout)
	}
	waitReadyByKind(t, p, []int{1, 1}, "the second kind's first run")

	// Each kind's next request takes its ready one, which is replaced;
	// the places stay shared.
	for _, s := range []sandbox.Spec{a, b, a, b} {
		if res := run(t, p, s); res.Status != sandbox.StatusOK {
			t.Fatalf("status %s stderr %q", res.Status, res.Stderr)
		}
		waitReadyByKind(t, p, []int{1, 1}, "a run")
	}
}
