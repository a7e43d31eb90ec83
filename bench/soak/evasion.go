package main

import (
	"context"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/client"
)

// evasionTimeout is the timeout every evasion program runs with, and
// evasionSlack how late past it the run may end.
const (
	evasionTimeout = time.Second
	evasionSlack   = 200 * time.Millisecond
)

// evasionPrelude names the program's processes (children inherit it), so
// that whatever survives can be found on the host.
const evasionPrelude = `import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None)
libc.prctl(15, b"%s")
print("started", flush=True)
`

// evasions are programs that try to outlive their timeout. Each name is
// also the process name prefix the check looks for.
var evasions = []struct {
	name, code string
	// exits: the main process ends by itself before the timeout (what it
	// started must not outlive it); otherwise the run must time out.
	exits bool
}{
	{name: "sigterm", code: `
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
while True:
    pass
`},
	{name: "dblfork", code: `
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            pass
    os._exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    time.sleep(1)
`},
	{name: "daemon", exits: true, code: `
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        while True:
            pass
    os._exit(0)
time.sleep(0.2)
`},
	{name: "forkloop", code: `
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    try:
        os.fork()
    except OSError:
        pass
`},
	{name: "ctbusy", code: `
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
while True:
    libc.getpid()
`},
	{name: "ctpause", code: `
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
libc.pause()
`},
	{name: "stopped", code: `
if os.fork() == 0:
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    time.sleep(1)
`},
}

// evasionReps is how many times each program runs.
const evasionReps = 3

// evasion runs every evasion program evasionReps times with a 1 s timeout
// and checks that each run ended in time, as it should (timeout, or
// completed for one that exits), with none of its processes left on the
// host right after the answer.
func evasion(ctx context.Context, s *server) (bool, error) {
	c := clients(s)[0]
	fmt.Printf("timeout evasion: timeout %v, each program %d times; wall is the client's request time, run the server's duration_ms\n\n",
		evasionTimeout, evasionReps)
	fmt.Println("| program | outcome | wall max | run max | processes left at the answer | after 1 s | verdict |")
	fmt.Println("|---|---|---|---|---|---|---|")
	ok := true
	for _, ev := range evasions {
		marker := "pxev-" + ev.name // at most 15 bytes: the kernel's limit
		code := fmt.Sprintf(evasionPrelude, marker) + ev.code
		var (
			wallMax, runMax time.Duration
			outcome         string
			leftAtAnswer    int
			leftLater       int
			good            = true
		)
		for range evasionReps {
			t := time.Now()
			r, _, err := runOne(ctx, c, code, &client.ExecutionConfig{TimeoutSeconds: int(evasionTimeout / time.Second)}, false)
			wall := time.Since(t)
			atAnswer := len(namedProcesses(marker))
			time.Sleep(time.Second)
			later := namedProcesses(marker)
			killAll(later)
			if err != nil {
				return false, fmt.Errorf("%s: %w", ev.name, err)
			}
			run := time.Duration(r.DurationMs) * time.Millisecond
			wallMax, runMax = max(wallMax, wall), max(runMax, run)
			leftAtAnswer, leftLater = max(leftAtAnswer, atAnswer), max(leftLater, len(later))
			outcome = string(r.Status)
			if r.Reason != "" {
				outcome += " (" + r.Reason + ")"
			}
			want := r.Status == client.StatusFailed && r.Reason == client.ReasonTimeout
			if ev.exits {
				want = r.Status == client.StatusCompleted
			}
			good = good && want && run <= evasionTimeout+evasionSlack && atAnswer == 0 && len(later) == 0
		}
		ok = ok && good
		fmt.Printf("| %s | %s | %d ms | %d ms | %d | %d | %s |\n", ev.name, outcome, wallMax.Milliseconds(), runMax.Milliseconds(),
			leftAtAnswer, leftLater, verdict(good))
	}
	return ok, nil
}
