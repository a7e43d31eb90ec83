package sandbox

import (
	"bytes"
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
	p, err := j.Start(ctx, spec, out)
	if err != nil {
		return Result{}, err
	}
	go p.feedStdin(spec.Stdin)
	return p.Wait(), nil
}

// Start starts spec's payload in the prepared jail and returns while it
// runs; Wait then gives its Result. Every layer and every limit of spec is
// in force from the first instruction of the payload; the wall clock
// starts now (HandOff restarts it). The payload's stdin stays open until
// CloseStdin (spec.Stdin is not written: see Run). A setup failure is not
// an error: the Process ends at once and Wait reports StatusSetupError.
func (j *Jail) Start(ctx context.Context, spec Spec, out OutputFunc) (*Process, error) {
	return j.launch(ctx, spec, out, false)
}

// launch is Start; with forkServer the payload is started as a fork server
// (execMsg.ForkServer).
func (j *Jail) launch(ctx context.Context, spec Spec, out OutputFunc, forkServer bool) (*Process, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if !sameBase(j.base, Base{Mounts: spec.Mounts, Network: spec.Network}) {
		return nil, fmt.Errorf("%w: mounts or network differ from the prepared jail", ErrInvalidSpec)
	}
	j.mu.Lock()
	if j.used || j.closed {
		j.mu.Unlock()
		return nil, ErrJailUsed
	}
	j.used = true
	j.mu.Unlock()

	p := j.newProcess(ctx, spec, out)
	p.exec.ForkServer = forkServer
	if j.cg != nil {
		if err := j.cg.SetLimits(p.r.limits.cgroup()); err != nil {
			return p.failed(err), nil
		}
	}
	if spec.Workspace != nil {
		// Before the exec: init confines the payload (Landlock) with the
		// workspace in place, whose rule a later mount would hide. A fork
		// server never has one, or every execution would see it.
		err := fmt.Errorf("%w: a fork server cannot mount a workspace", ErrInvalidSpec)
		if !forkServer {
			err = j.mountWorkspace(spec.Workspace)
		}
		if err != nil {
			return p.failed(err), nil
		}
	}
	p.drain()
	if err := j.send(ctx, message{Kind: kindExec, Exec: p.exec}); err != nil {
		return p.failed(err), nil
	}
	m, err := j.await(ctx, kindStarted)
	if err != nil {
		if ctx.Err() != nil {
			p.r.end.cancelled = true
			p.finish(0, nil)
			return p, nil
		}
		return p.failed(err), nil
	}
	if m.Started == nil {
		return p.failed(fmt.Errorf("protocol: started message without a pid")), nil
	}
	p.running(m.Started.Pid)
	return p, nil
}

// newProcess is the parent's side of spec's payload in j, before it runs.
func (j *Jail) newProcess(ctx context.Context, spec Spec, out OutputFunc) *Process {
	limits := spec.Limits.WithDefaults()
	p := &Process{
		j:        j,
		ctx:      ctx,
		r:        &runState{limits: limits, stop: make(chan struct{})},
		rearm:    make(chan Limits),
		done:     make(chan struct{}),
		released: make(chan struct{}),
		exitCh:   make(chan exitInfo, 1),
	}
	j.mu.Lock()
	j.proc = p
	j.mu.Unlock()
	p.stdout = &capture{stream: Stdout, limit: limits.StdoutBytes, live: out, onLimit: p.r.outputLimit}
	p.stderr = &capture{stream: Stderr, limit: limits.StderrBytes, live: out, onLimit: p.r.outputLimit}
	p.channel = &capture{stream: Channel, limit: ChannelBytes}
	if spec.StreamChannel {
		p.channel.live = out
	}
	if spec.LiveOnly {
		p.stdout.discard, p.stderr.discard, p.channel.discard = true, true, true
	}
	dir := spec.Dir
	if dir == "" {
		dir = WorkDir
	}
	p.scratch = scratchSizes(limits)
	p.exec = &execMsg{Argv: spec.Argv, Env: spec.Env, Dir: dir, Files: spec.Files, Limits: limits,
		Channel: spec.ResultChannel, Requests: spec.Requests}
	if spec.Collect != nil {
		c := spec.Collect.withDefaults()
		p.exec.Collect = &c
	}
	return p
}

// drain reads the payload's stdout, stderr and channel until EOF.
func (p *Process) drain() {
	for _, d := range []struct {
		c *capture
		f *os.File
	}{{p.stdout, p.j.stdoutR}, {p.stderr, p.j.stderrR}, {p.channel, p.j.chanR}} {
		p.drains.Add(1)
		go func() {
			defer p.drains.Done()
			buf := p.j.m.chunk()
			defer p.j.m.chunks.Put(buf)
			d.c.drain(d.f, *buf)
		}()
	}
}

// running records that the payload (nsPid, its pid in the jail) started:
// the wall clock starts and the parent watches for its end. Its host pid
// is looked up when it is first signalled (see payloadLocked), not here:
// nearly no execution is ever signalled, and the lookup reads two /proc
// files.
func (p *Process) running(nsPid int) {
	p.nsPid = nsPid
	p.start = time.Now()
	p.col = &collected{done: make(chan struct{})}
	go p.readExit()
	go p.watch()
}

// Process is a payload running in its jail. Its owner may talk to it
// while it runs (Send, Signal, HandOff) and must call Wait.
type Process struct {
	j     *Jail
	ctx   context.Context
	r     *runState
	exec  *execMsg
	nsPid int // the payload's pid in its jail's pid namespace
	// payloadDir is the payload's /proc directory, opened when it is
	// first signalled (payloadLocked), hostPid its pid in the host's pid
	// namespace; pidClosed once the payload is gone (forgetPayload).
	// pidMu guards the three.
	payloadDir *os.File
	hostPid    int
	pidClosed  bool
	pidMu      sync.Mutex
	start      time.Time

	stdout, stderr, channel *capture
	drains                  sync.WaitGroup
	col                     *collected
	exitCh                  chan exitInfo
	rearm                   chan Limits

	done     chan struct{} // closed when every process is gone and res is final
	released chan struct{} // closed when the cgroup is removed too
	res      Result
	sendMu   sync.Mutex

	// handedFiles are the files HandOff wrote: init never saw them, so
	// the parent leaves them out of the collected files if unchanged.
	handedFiles []File
	// scratch is what the jail's tmpfs mounts were sized to: at start
	// (init's mountScratch, or the fork server's mounts for a forked
	// execution), then by each Retune. Only Retune reads or changes it
	// after newProcess.
	scratch [3]scratchSize
}

// failed ends a Process that never started its payload.
func (p *Process) failed(err error) *Process {
	p.j.kill()
	if uerr := p.j.unmountWorkspace(); uerr != nil {
		p.j.m.log.Warn("unmounting a workspace", "jail", p.j.id, "err", uerr)
	}
	p.res = Result{Status: StatusSetupError, Reason: err.Error(), ExitCode: -1}
	close(p.done)
	close(p.released)
	return p
}

// readExit receives init's exit report, then the collected files.
func (p *Process) readExit() {
	defer close(p.col.done)
	if m, err := p.j.wire.expect(kindExit); err == nil && m.Exit != nil {
		p.exitCh <- *m.Exit
		switch {
		case p.exec.Collect != nil && p.j.reaper != nil:
			// A forked execution's reaper has killed what the payload
			// left and waits while the parent reads the workspace.
			p.col.files, p.col.omitted, p.col.err = p.j.collectVia(*p.exec.Collect)
		case p.exec.Collect != nil:
			p.col.files, p.col.omitted, p.col.err = receiveFiles(p.j.wire, *p.exec.Collect)
		}
	}
	close(p.exitCh)
}

// watch waits for the end of the run and tears the jail down.
func (p *Process) watch() {
	p.r.wait(p.ctx, p.j, p.exitCh, p.rearm)
	wall := time.Since(p.startTime())
	var counted chan cgroupUsage
	if p.exec.Collect != nil && p.r.exited() {
		if p.j.reaper != nil {
			// A forked execution's reaper reports only once every other
			// process of it has ended: what its cgroup counted is final,
			// and is read while the workspace is.
			counted = make(chan cgroupUsage, 1)
			go func() { counted <- p.j.cgroupUsage() }()
		}
		p.col.wait(p.ctx)
	}
	p.finish(wall, counted)
}

func (p *Process) startTime() time.Time {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	return p.start
}

// finish ends the jail and records the Result. Whatever happened, the jail
// ends now: killing init kills its pid namespace; the pipes then reach EOF
// and the drains finish. counted, when not nil, delivers the cgroup's
// counters read already; else they are read here.
func (p *Process) finish(wall time.Duration, counted <-chan cgroupUsage) {
	j := p.j
	j.kill()
	// A forked execution's reaper reports the exit only after it killed
	// and reaped every other process of its pid namespace: then only the
	// reaper itself is left, and the Result need not wait for its end.
	if j.reaper == nil || !p.r.exited() {
		<-j.initDone
	}
	j.waitDrains(&p.drains)
	var u cgroupUsage
	if counted != nil {
		u = <-counted
	} else {
		u = j.cgroupUsage()
	}
	res := p.r.result(j, u, p.stdout, p.stderr, p.channel, wall)
	if p.col != nil && p.exec.Collect != nil {
		<-p.col.done // init is gone: its pipe is at EOF
		p.r.mu.Lock()
		handed := p.handedFiles
		p.r.mu.Unlock()
		res.Files, res.FilesOmitted = unchangedInputsDropped(p.col.files, handed, p.exec.Collect), p.col.omitted
		if p.col.err != nil {
			j.m.log.Warn("collecting workspace files", "jail", j.id, "err", p.col.err)
		}
	}
	// Every process of the jail is gone by now (init's exit waits for the
	// whole pid namespace): its workspace comes off before the Result is
	// given, so that whoever commits the workspace reads it unmounted.
	if err := j.unmountWorkspace(); err != nil {
		j.m.log.Warn("unmounting a workspace", "jail", j.id, "err", err)
	}
	p.res = res
	p.forgetPayload()
	// The Result is final; removing the cgroup is only cleanup, which
	// Jail.Close waits for.
	close(p.done)
	// A reaper was killed above: its cgroup is released once it is gone,
	// which its pidfd tells (polling the cgroup's pid list costs more).
	if j.reaper != nil {
		<-j.initDone
	}
	j.releaseCgroup()
	close(p.released)
}

// unchangedInputsDropped removes from collected the input files the run
// left as they were, as init does for the files it wrote itself; with
// globs, matching files are kept changed or not.
func unchangedInputsDropped(collected []CollectedFile, inputs []File, c *Collect) []CollectedFile {
	if len(inputs) == 0 || len(c.Globs) > 0 {
		return collected
	}
	in := make(map[string][]byte, len(inputs))
	for _, f := range inputs {
		if p, err := cleanRelPath(f.Path); err == nil {
			in[p] = f.Data
		}
	}
	out := collected[:0:0]
	for _, f := range collected {
		if data, ok := in[f.Path]; ok && bytes.Equal(data, f.Data) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// Wait blocks until the payload has ended and every process of its jail
// is gone, and returns the Result.
func (p *Process) Wait() Result {
	<-p.done
	return p.res
}

// Done is closed when the Process has ended (Wait no longer blocks).
func (p *Process) Done() <-chan struct{} { return p.done }

// Kill stops the payload now; Wait then reports StatusKilled.
func (p *Process) Kill() {
	p.r.mu.Lock()
	p.r.end.cancelled = true
	p.r.mu.Unlock()
	p.r.once.Do(func() { close(p.r.stop) })
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

// wait blocks until the payload exits, a limit is hit or ctx ends. A
// value on rearm (a hand-off) replaces the limits and restarts the wall
// clock and the CPU budget.
func (r *runState) wait(ctx context.Context, j *Jail, exitCh <-chan exitInfo, rearm <-chan Limits) {
	wall := time.NewTimer(r.currentLimits().WallTime)
	defer wall.Stop()
	var tick <-chan time.Time
	if j.cg != nil {
		t := time.NewTicker(cpuPoll)
		defer t.Stop()
		tick = t.C
	}
	var cpuBase time.Duration
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
		case l := <-rearm:
			r.mu.Lock()
			r.limits = l
			r.mu.Unlock()
			wall.Reset(l.WallTime)
			if j.cg != nil {
				cpuBase, _ = j.cg.CPUUsage()
			}
		case <-wall.C:
			r.mu.Lock()
			r.end.wallTimeout = true
			r.mu.Unlock()
			return
		case <-tick:
			if used, err := j.cg.CPUUsage(); err == nil && used-cpuBase > r.currentLimits().CPUTime {
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

func (r *runState) currentLimits() Limits {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.limits
}

// result assembles the Result after the jail is gone.
// cgroupUsage is what a jail's cgroup counted, for its Result.
type cgroupUsage struct {
	cpu     time.Duration
	haveCPU bool
	peak    int64
	oom     bool
	haveMem bool
}

// cgroupUsage reads the counters of j's cgroup (none without one).
func (j *Jail) cgroupUsage() cgroupUsage {
	var u cgroupUsage
	cg := j.cgroup()
	if cg == nil {
		return u
	}
	if cpu, err := cg.CPUUsage(); err == nil {
		u.cpu, u.haveCPU = cpu, true
	}
	if peak, oom, err := cg.Usage(); err == nil {
		u.peak, u.oom, u.haveMem = peak, oom, true
	}
	return u
}

func (r *runState) result(j *Jail, u cgroupUsage, stdout, stderr, channel *capture, wall time.Duration) Result {
	res := Result{WallTime: wall, ExitCode: -1}
	if j.cgroup() != nil {
		if u.haveCPU {
			res.CPUTime = u.cpu
		}
		if u.haveMem {
			res.PeakMemory = u.peak
			r.mu.Lock()
			r.end.oomKilled = u.oom && !(r.end.haveExit && r.end.exit.Exited && r.end.exit.ExitCode == 0)
			r.mu.Unlock()
		}
	} else if j.cmd != nil && j.cmd.ProcessState != nil {
		st := j.cmd.ProcessState
		res.CPUTime = st.UserTime() + st.SystemTime()
	}
	r.mu.Lock()
	end := r.end
	r.mu.Unlock()
	end.limits = r.currentLimits()
	if !end.haveExit {
		said, _, _ := bytes.Cut(bytes.TrimSpace(j.initStderr.Bytes()), []byte("\n"))
		end.initSaid = string(said)
	}
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
func (p *Process) feedStdin(data []byte) {
	if len(data) > 0 {
		_, _ = p.j.stdinW.Write(data)
	}
	_ = p.j.stdinW.Close()
}

func sameBase(a, b Base) bool {
	if a.Network != b.Network || len(a.Mounts) != len(b.Mounts) {
		return false
	}
	for i := range a.Mounts {
		if a.Mounts[i].Source != b.Mounts[i].Source || a.Mounts[i].target() != b.Mounts[i].target() || a.Mounts[i].Writable != b.Mounts[i].Writable {
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
