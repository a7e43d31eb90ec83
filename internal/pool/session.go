package pool

import (
	"context"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// A session's kernel forked from the fork server of its interpreter,
// mounts and base environment starts with the server's preloads already
// imported. It holds the server: a fork server lives while a kind or a
// session kernel uses it, and its kernels end with it.

// sessionFork is a live session kernel forked from f's server.
type sessionFork struct {
	f    *forking
	proc *sandbox.Process
}

// ForkSession starts the session kernel spec (a runner.SessionArgv
// command line) from the fork server its interpreter, mounts and base
// environment share with executions: it takes the kernel forked ahead for
// that server if one waits and spec's limits fit the pool's ceilings, else
// it forks one, starting the server when none runs and start allows it;
// then it forks the next session's kernel ahead, in the background. The
// kernel gets a forked execution's isolation and spec's limits,
// environment and (once written with WriteFiles by the caller) files. The
// caller closes the jail once the process ended, then calls release, which
// lets the fork server go when nothing else uses it.
//
// A nil jail and a nil error say that spec does not fork here (fork
// servers off, unavailable or not running without start, network, a
// mount that is not trusted (Config.TrustedMount), environment additions
// a running interpreter cannot take): the caller starts the kernel cold.
func (p *Pool) ForkSession(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc, start bool) (*sandbox.Jail, *sandbox.Process, func(), error) {
	if !p.cfg.ForkServer || spec.Network || len(spec.Argv) == 0 || !p.forkable(spec) {
		return nil, nil, nil, nil
	}
	args, extra, ok := runner.ForkedSession(spec.Argv, spec.Env, p.cfg.BaseEnv)
	if !ok {
		return nil, nil, nil, nil
	}
	p.mu.Lock()
	if p.ctx.Err() != nil {
		p.mu.Unlock()
		return nil, nil, nil, nil
	}
	ws := warmSpec(spec, runner.WarmArgv(spec.Argv[0]), p.cfg)
	f := p.forkingFor(ws)
	p.mu.Unlock()
	j, proc := p.takeKernel(f, spec, out, args, extra)
	if j == nil {
		tpl, _ := p.template(f, false, start)
		if tpl == nil {
			p.unuse(f)
			return nil, nil, nil, nil
		}
		err := p.countFork(f, tpl, func() (err error) {
			j, proc, err = tpl.ForkKernel(ctx, spec, out, args, extra)
			return err
		})
		if err != nil {
			p.unuse(f)
			return nil, nil, nil, err
		}
	}
	p.prefork(f, ws) // the next session's
	sf := &sessionFork{f: f, proc: proc}
	p.mu.Lock()
	p.sessions[sf] = struct{}{}
	p.mu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			p.mu.Lock()
			delete(p.sessions, sf)
			p.mu.Unlock()
			p.unuse(f)
		})
	}
	return j, proc, release, nil
}

// takeKernel hands a kernel f forked ahead to the session spec: its
// limits tightened to spec's, its output to out, its arguments and
// environment additions sent. nil when there is none ready, spec's limits
// do not fit the pool's ceilings, or the kernel died waiting.
func (p *Pool) takeKernel(f *forking, spec sandbox.Spec, out sandbox.OutputFunc, args, extra []string) (*sandbox.Jail, *sandbox.Process) {
	l := spec.Limits.WithDefaults()
	req, ok := runner.SessionRequest(args, extra)
	if !ok || !p.fits(l) || l.CPUTime > kernelCPU {
		return nil, nil
	}
	for {
		f.mu.Lock()
		if len(f.kernels) == 0 {
			f.mu.Unlock()
			return nil, nil
		}
		w := f.kernels[0]
		f.kernels = f.kernels[1:]
		f.mu.Unlock()
		if w.dead() {
			w.discard()
			continue
		}
		w.relay.to.Store(&out)
		if err := w.proc.Retune(l, nil); err != nil {
			w.discard()
			continue
		}
		if err := w.proc.Send(req); err != nil {
			w.discard()
			continue
		}
		return w.jail, w.proc
	}
}

// kernelCPU is the CPU time a kernel forked ahead may use (its RLIMIT_CPU,
// fixed at its fork); a session allowed more forks its own.
const kernelCPU = 24 * time.Hour

// prefork forks one session kernel of f ahead, in the background, unless
// one is ready or being forked: the next session of f takes it. It waits
// on its request pipe for its session (runner.WaitSessionArgs), with the
// pool's ceilings until then.
func (p *Pool) prefork(f *forking, ws sandbox.Spec) {
	f.mu.Lock()
	if f.closed || f.preforking || len(f.kernels) > 0 {
		f.mu.Unlock()
		return
	}
	f.preforking = true
	f.mu.Unlock()
	ks := ws
	ks.Argv = runner.SessionArgv(ws.Argv[0], runner.SessionOptions{})
	ks.ResultChannel, ks.StreamChannel, ks.Requests, ks.LiveOnly, ks.Collect = true, true, true, true, nil
	ks.Limits.CPUTime = kernelCPU
	// Added under p.mu, before Close cancels and waits (see Close).
	p.mu.Lock()
	if p.ctx.Err() != nil {
		p.mu.Unlock()
		f.mu.Lock()
		f.preforking = false
		f.mu.Unlock()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		var w *warmJail
		defer func() {
			f.mu.Lock()
			f.preforking = false
			keep := w != nil && !f.closed
			if keep {
				f.kernels = append(f.kernels, w)
			}
			f.mu.Unlock()
			if w != nil && !keep {
				w.discard()
			}
		}()
		tpl, _ := p.template(f, false, false)
		if tpl == nil {
			return
		}
		r := &relay{}
		_ = p.countFork(f, tpl, func() error {
			j, proc, err := tpl.ForkKernel(p.ctx, ks, r.out, runner.WaitSessionArgs(), nil)
			if err == nil {
				w = &warmJail{jail: j, proc: proc, relay: r, tpl: tpl}
			}
			return err
		})
	}()
}

// readyKernels are the kernels f forked ahead.
func (f *forking) readyKernels() []*warmJail {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*warmJail(nil), f.kernels...)
}
