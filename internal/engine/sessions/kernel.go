package sessions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// kernel is one interpreter of a session: a jail and the driver's session
// mode running in it. A restart replaces the kernel, never the session.
type kernel struct {
	jail   *sandbox.Jail
	proc   *sandbox.Process
	forked bool // forked from a fork server, not started in a jail of its own
	// eg is the egress of a kernel with network (nil: none), closed once
	// its jail is, when its session's network is refused meanwhile
	// (recheckNetwork), or when it hibernates (made again if that fails);
	// its totals then go to use, the session's. egMu guards eg once the
	// kernel runs.
	egMu sync.Mutex
	eg   *egress.Egress
	use  *netUse
	// egEnded is set once the kernel ended: no egress attaches after (a
	// failed hibernation reopening its network, reopenNetwork).
	egEnded bool
	// egClosed is told eg's totals once it is closed.
	egClosed func(egress.Stats)
	release  func()        // gives back what the kernel held of the fork server
	ended    chan struct{} // closed once proc has ended and cur was failed
	res      sandbox.Result
	// scan reads the channel: it also takes a saved state (ExpectState)
	// and the outcome of a load (OnLoaded).
	scan *runner.SessionScanner

	mu  sync.Mutex
	cur *cellRun // the running cell, nil between cells
}

// cellRun collects one cell's output as the kernel's three pipes deliver
// it; done is closed when its report and both end markers arrived.
type cellRun struct {
	n        int
	own      bool // pyexec's own cell (flagged x): its output is dropped
	limit    int64
	stdout   cappedBuffer
	stderr   cappedBuffer
	outputs  []run.Output
	report   *run.Report
	ends     int
	done     chan struct{}
	finished bool
}

// cappedBuffer keeps at most its limit and says whether it dropped bytes.
type cappedBuffer struct {
	buf       bytes.Buffer
	truncated bool
}

func (b *cappedBuffer) write(p []byte, limit int64) {
	room := limit - int64(b.buf.Len())
	if int64(len(p)) > room {
		p, b.truncated = p[:max(room, 0)], true
	}
	b.buf.Write(p)
}

func newCellRun(n int, limit int64) *cellRun {
	return &cellRun{n: n, limit: limit, done: make(chan struct{})}
}

// kernelNet is the network of a kernel about to start: the session's id,
// its plan and its use so far.
type kernelNet struct {
	id, caller string
	plan       run.NetPlan
	use        *netUse
}

// startKernel starts the session's kernel with files in its workspace:
// forked from a fork server when the forker has one for spec (and, with
// start, may start it), spec mounts no persistent workspace and has no
// network, else in a jail prepared for it. A kernel with network (net)
// gets its own egress, attached between the jail's Prepare and Start;
// if it cannot be, the kernel does not start (never one with more network
// than its plan). ctx bounds the kernel's whole life.
func (m *Service) startKernel(ctx context.Context, spec sandbox.Spec, start bool, net *kernelNet) (*kernel, error) {
	k := &kernel{ended: make(chan struct{}), release: func() {}}
	out := k.sink()
	if spec.Network != (net != nil) {
		return nil, fmt.Errorf("%w: a session's network and its plan differ", run.ErrInvalid)
	}
	if f := m.deps.Forker; f != nil && spec.Workspace == nil && !spec.Network {
		j, p, release, err := f.ForkSession(ctx, spec, out, start)
		switch {
		case err != nil:
			// The fork server is broken (the pool replaces it): a jail of
			// the session's own isolates it just as well.
			m.log.Warn("forking a session's kernel failed; starting it cold", "err", err)
		case j != nil:
			k.jail, k.release, k.forked = j, release, true
			if err := k.started(p, spec.Files); err != nil {
				return nil, err
			}
			return k, nil
		}
	}
	j, err := m.deps.Jails.Prepare(ctx, sandbox.Base{Mounts: spec.Mounts, Network: spec.Network})
	if err != nil {
		return nil, fmt.Errorf("preparing the session's jail: %w", err)
	}
	k.jail = j
	if net != nil {
		if err := k.attach(m, j, net); err != nil {
			_ = j.Close()
			return nil, err
		}
	}
	p, err := j.Start(ctx, spec, out)
	if err != nil {
		_ = j.Close()
		k.closeEgress()
		return nil, fmt.Errorf("starting the session's interpreter: %w", err)
	}
	if err := k.started(p, nil); err != nil {
		return nil, err
	}
	return k, nil
}

// attach makes the kernel's egress and attaches it to j: a jail prepared
// for the kernel, or its running one once a failed hibernation closed
// its egress (reopenNetwork). A session whose byte quota is spent starts
// without one: its jail has network on and no route out.
func (k *kernel) attach(m *Service, j *sandbox.Jail, net *kernelNet) error {
	if limit := net.use.limited(); limit != "" {
		m.log.Warn("session network cut by a limit: the kernel starts without a route out", "session_id", net.id,
			"caller", net.caller, "limit", limit)
		return nil
	}
	eg, err := m.startEgress(net)
	switch {
	case errors.Is(err, run.ErrQuotaSpent):
		m.log.Warn("session network quota spent: the kernel starts without a route out", "session_id", net.id)
		return nil
	case err != nil:
		return err
	}
	if err := j.AttachEgress(eg); err != nil {
		_ = eg.Close()
		return fmt.Errorf("attaching the session's egress: %w", err)
	}
	k.egMu.Lock()
	defer k.egMu.Unlock()
	if k.egEnded {
		_ = eg.Close()
		return errors.New("attaching the session's egress: its interpreter ended")
	}
	k.eg, k.use = eg, net.use
	k.egClosed = func(st egress.Stats) { m.egressClosed(net, st) }
	return nil
}

// closeEgress closes the kernel's egress, if any, and adds its totals to
// the session's.
func (k *kernel) closeEgress() {
	k.egMu.Lock()
	defer k.egMu.Unlock()
	if k.eg == nil {
		return
	}
	_ = k.eg.Close()
	st := k.eg.Stats()
	k.use.spent(st)
	k.egClosed(st)
	k.eg = nil
}

// syncEgress waits until the session has every event the kernel's
// egress reported so far (none without one), for at most syncWait or
// until ctx ends: a hook slowed by the store (a secret's audit record)
// delays a cell's result by no more, and what is left comes with a later
// cell.
func (k *kernel) syncEgress(ctx context.Context) {
	k.egMu.Lock()
	eg := k.eg
	k.egMu.Unlock()
	if eg != nil {
		ctx, cancel := context.WithTimeout(ctx, syncWait)
		defer cancel()
		eg.Sync(ctx)
	}
}

// syncWait bounds how long a cell's result waits for its network events.
const syncWait = 2 * time.Second

// sink routes the kernel's three pipes: output to the running cell, cell
// ends and reports to their bookkeeping.
func (k *kernel) sink() sandbox.OutputFunc {
	k.scan = runner.NewSessionScanner(k.output, k.report)
	scan := k.scan
	stdout := runner.NewCellSplitter(func(b []byte) { k.stream(b, false) }, k.end)
	stderr := runner.NewCellSplitter(func(b []byte) { k.stream(b, true) }, k.end)
	return func(s sandbox.Stream, b []byte) {
		switch s {
		case sandbox.Stdout:
			stdout.Write(b)
		case sandbox.Stderr:
			stderr.Write(b)
		case sandbox.Channel:
			scan.Write(b)
		}
	}
}

// started takes p as the kernel's process once it runs: files (a forked
// kernel's, which its jail's init did not write) go into its workspace and
// its stdin is closed. On failure the kernel is torn down.
func (k *kernel) started(p *sandbox.Process, files []sandbox.File) error {
	fail := func(err error) error {
		p.Kill()
		p.Wait()
		_ = k.jail.Close()
		k.closeEgress()
		k.release()
		return fmt.Errorf("starting the session's interpreter: %w", err)
	}
	select {
	case <-p.Done():
		res := p.Wait()
		return fail(fmt.Errorf("%s: %s", res.Status, res.Reason))
	default:
	}
	if len(files) > 0 {
		if err := p.WriteFiles(files); err != nil {
			return fail(err)
		}
	}
	// input() gets EOF instead of waiting for a terminal nobody has.
	_ = p.CloseStdin()
	k.proc = p
	return nil
}

// watch waits for the kernel's end and fails the cell it was running.
func (k *kernel) watch() {
	k.res = k.proc.Wait()
	_ = k.jail.Close()
	k.egMu.Lock()
	k.egEnded = true
	k.egMu.Unlock()
	k.closeEgress()
	k.release()
	k.mu.Lock()
	if c := k.cur; c != nil && !c.finished {
		c.finished = true
		close(c.done)
	}
	k.mu.Unlock()
	close(k.ended)
}

// begin makes c the running cell and sends it to the kernel.
func (k *kernel) begin(c *cellRun, cell runner.Cell) error {
	k.mu.Lock()
	k.cur = c
	k.mu.Unlock()
	if err := k.proc.Send(cell.Frame()); err != nil {
		k.mu.Lock()
		k.cur = nil
		k.mu.Unlock()
		return err
	}
	return nil
}

// finish detaches the running cell once it is done.
func (k *kernel) finish(c *cellRun) {
	k.mu.Lock()
	if k.cur == c {
		k.cur = nil
	}
	k.mu.Unlock()
}

func (k *kernel) stream(b []byte, stderr bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.cur
	if c == nil || c.finished || c.own {
		return // output between cells (a leftover child process), or of pyexec's own cell: dropped
	}
	if stderr {
		c.stderr.write(b, c.limit)
	} else {
		c.stdout.write(b, c.limit)
	}
}

func (k *kernel) output(o runner.Output) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.cur; c != nil && !c.finished && !c.own {
		c.outputs = append(c.outputs, run.Output(o))
	}
}

func (k *kernel) report(n int, r runner.Report) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.cur; c != nil && c.n == n && c.report == nil {
		rep := run.ReportOf(r)
		c.report = &rep
		k.check(c)
		if !c.finished {
			time.AfterFunc(markerGrace, func() {
				k.mu.Lock()
				defer k.mu.Unlock()
				if !c.finished {
					c.finished = true
					close(c.done)
				}
			})
		}
	}
}

func (k *kernel) end(n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.cur; c != nil && c.n == n {
		c.ends++
		k.check(c)
	}
}

// check closes c.done once the cell has fully ended; k.mu is held.
func (k *kernel) check(c *cellRun) {
	if !c.finished && c.report != nil && c.ends >= 2 {
		c.finished = true
		close(c.done)
	}
}

// stop kills the kernel and waits until its jail is gone.
func (k *kernel) stop() {
	k.proc.Kill()
	<-k.ended
}

// markerGrace bounds how long a cell whose report arrived waits for its end
// markers: user code that closed fd 1 or 2 never lets them through.
const markerGrace = 200 * time.Millisecond
