package sandbox

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
)

// cpuPoll is how often the parent checks the jail's CPU time against its
// limit. RLIMIT_CPU bounds each process exactly; this bounds their sum.
const cpuPoll = 50 * time.Millisecond

// Run gives the prepared jail its payload and waits for it. A jail runs
// exactly one payload: a second call fails with ErrJailUsed. Run does not
// Close the jail; the caller does (Manager.Run does both).
func (j *Jail) Run(ctx context.Context, spec Spec, out OutputFunc) (Result, error) {
	if err := spec.Validate(); err != nil {
		return Result{}, err
	}
	if !sameBase(j.base, Base{Mounts: spec.Mounts, Network: spec.Network}) {
		return Result{}, fmt.Errorf("%w: mounts or network differ from the prepared jail", ErrInvalidSpec)
	}
	j.mu.Lock()
	if j.used || j.closed {
		j.mu.Unlock()
		return Result{}, ErrJailUsed
	}
	j.used = true
	j.mu.Unlock()

	limits := spec.Limits.withDefaults()
	setupErr := func(err error) (Result, error) {
		j.kill()
		return Result{Status: StatusSetupError, Reason: err.Error(), ExitCode: -1}, nil
	}
	if j.cg != nil {
		if err := j.cg.setLimits(limits); err != nil {
			return setupErr(err)
		}
	}

	r := &runState{limits: limits, stop: make(chan struct{})}
	stdout := &capture{stream: Stdout, limit: limits.StdoutBytes, live: out, onLimit: r.outputLimit}
	stderr := &capture{stream: Stderr, limit: limits.StderrBytes, live: out, onLimit: r.outputLimit}
	channel := &capture{stream: Channel, limit: ChannelBytes}
	if spec.StreamChannel {
		channel.live = out
	}
	var drains sync.WaitGroup
	for _, d := range []struct {
		c *capture
		f interface{ Read([]byte) (int, error) }
	}{{stdout, j.stdoutR}, {stderr, j.stderrR}, {channel, j.chanR}} {
		drains.Add(1)
		go func() {
			defer drains.Done()
			d.c.drain(d.f)
		}()
	}

	dir := spec.Dir
	if dir == "" {
		dir = WorkDir
	}
	exec := &execMsg{Argv: spec.Argv, Env: spec.Env, Dir: dir, Files: spec.Files, Limits: limits, Channel: spec.ResultChannel}
	if spec.Collect != nil {
		c := spec.Collect.withDefaults()
		exec.Collect = &c
	}
	if err := j.send(ctx, message{Kind: kindExec, Exec: exec}); err != nil {
		return setupErr(err)
	}
	if _, err := j.await(ctx, kindStarted); err != nil {
		if ctx.Err() != nil {
			r.end.cancelled = true
			j.kill()
			drains.Wait()
			return r.result(j, stdout, stderr, channel, 0), nil
		}
		return setupErr(err)
	}
	start := time.Now()
	go j.feedStdin(spec.Stdin)

	exitCh := make(chan exitInfo, 1)
	col := &collected{done: make(chan struct{})}
	go func() {
		defer close(col.done)
		if m, err := j.wire.expect(kindExit); err == nil && m.Exit != nil {
			exitCh <- *m.Exit
			if exec.Collect != nil {
				col.files, col.omitted, col.err = receiveFiles(j.wire, *exec.Collect)
			}
		}
		close(exitCh)
	}()
	r.wait(ctx, j, exitCh, start)
	wall := time.Since(start)
	if exec.Collect != nil && r.exited() {
		col.wait(ctx)
	}
	// Whatever happened, the jail ends now: killing init kills its pid
	// namespace; the pipes then reach EOF and the drains finish.
	j.kill()
	<-j.initDone
	j.waitDrains(&drains)
	res := r.result(j, stdout, stderr, channel, wall)
	if exec.Collect != nil {
		<-col.done // init is gone: its pipe is at EOF
		res.Files, res.FilesOmitted = col.files, col.omitted
		if col.err != nil {
			j.m.log.Warn("collecting workspace files", "jail", j.id, "err", col.err)
		}
	}
	j.releaseCgroup()
	return res, nil
}

// drainGrace bounds how long output is still read after init died. With a
// pid namespace every writer is dead by then; in unsafe mode a daemonized
// process could hold a pipe open forever.
const drainGrace = 2 * time.Second

func (j *Jail) waitDrains(wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(drainGrace):
		for _, f := range []*os.File{j.stdoutR, j.stderrR, j.chanR} {
			_ = f.SetReadDeadline(time.Now())
		}
		<-done
	}
}

// runState is what the parent observes while a payload runs.
type runState struct {
	limits Limits
	mu     sync.Mutex
	end    ending
	stop   chan struct{}
	once   sync.Once
}

func (r *runState) outputLimit(s Stream) {
	r.mu.Lock()
	if r.end.outputLimit == 0 {
		r.end.outputLimit = s
	}
	r.mu.Unlock()
	r.once.Do(func() { close(r.stop) })
}

// wait blocks until the payload exits, a limit is hit or ctx ends.
func (r *runState) wait(ctx context.Context, j *Jail, exitCh <-chan exitInfo, start time.Time) {
	wall := time.NewTimer(r.limits.WallTime)
	defer wall.Stop()
	var tick <-chan time.Time
	if j.cg != nil {
		t := time.NewTicker(cpuPoll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case x, ok := <-exitCh:
			r.mu.Lock()
			if ok {
				r.end.exit, r.end.haveExit = x, true
			}
			r.mu.Unlock()
			return
		case <-r.stop:
			return
		case <-wall.C:
			r.mu.Lock()
			r.end.wallTimeout = true
			r.mu.Unlock()
			return
		case <-tick:
			if used, err := j.cg.cpuUsage(); err == nil && used > r.limits.CPUTime {
				r.mu.Lock()
				r.end.cpuTimeout = true
				r.mu.Unlock()
				return
			}
		case <-ctx.Done():
			r.mu.Lock()
			r.end.cancelled = true
			r.mu.Unlock()
			return
		}
	}
}

// result assembles the Result after the jail is gone.
func (r *runState) result(j *Jail, stdout, stderr, channel *capture, wall time.Duration) Result {
	res := Result{WallTime: wall, ExitCode: -1}
	if j.cg != nil {
		if cpu, err := j.cg.cpuUsage(); err == nil {
			res.CPUTime = cpu
		}
		if peak, oom, err := j.cg.usage(); err == nil {
			res.PeakMemory = peak
			r.mu.Lock()
			r.end.oomKilled = oom && !(r.end.haveExit && r.end.exit.Exited && r.end.exit.ExitCode == 0)
			r.mu.Unlock()
		}
	} else if st := j.cmd.ProcessState; st != nil {
		res.CPUTime = st.UserTime() + st.SystemTime()
	}
	r.mu.Lock()
	end := r.end
	r.mu.Unlock()
	end.limits = r.limits
	res.Status, res.Reason = end.classify()
	if end.haveExit {
		res.ExitCode = end.exit.exitCode()
		res.Signal = end.exit.Signal
	} else {
		res.ExitCode = 128 + sigKill
		res.Signal = sigKill
	}
	res.Stdout, res.StdoutTruncated = stdout.result()
	res.Stderr, res.StderrTruncated = stderr.result()
	res.Channel, _ = channel.result()
	return res
}

// feedStdin writes the payload's stdin and closes it, so a payload that
// reads to EOF sees the end. A payload that never reads gets EPIPE here
// when it exits, which is fine.
func (j *Jail) feedStdin(data []byte) {
	if len(data) > 0 {
		_, _ = j.stdinW.Write(data)
	}
	_ = j.stdinW.Close()
}

func sameBase(a, b Base) bool {
	if a.Network != b.Network || len(a.Mounts) != len(b.Mounts) {
		return false
	}
	for i := range a.Mounts {
		if a.Mounts[i].Source != b.Mounts[i].Source || a.Mounts[i].target() != b.Mounts[i].target() {
			return false
		}
	}
	return true
}

// exited reports whether the payload ended by itself (not stopped).
func (r *runState) exited() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end.haveExit
}
