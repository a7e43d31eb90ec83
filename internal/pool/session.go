package pool

import (
	"context"
	"sync"

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
// command line) by forking it from the fork server its interpreter,
// mounts and base environment share with executions, starting that server
// when none runs and start allows it. The kernel gets a forked execution's isolation and
// spec's limits, environment and (once written with WriteFiles by the
// caller) files. The caller closes the jail once the process ended, then
// calls release, which lets the fork server go when nothing else uses it.
//
// A nil jail and a nil error say that spec does not fork here (fork
// servers off, unavailable or not running without start, network,
// environment additions a running interpreter cannot take): the caller
// starts the kernel cold.
func (p *Pool) ForkSession(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc, start bool) (*sandbox.Jail, *sandbox.Process, func(), error) {
	if !p.cfg.ForkServer || spec.Network || len(spec.Argv) == 0 {
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
	f := p.forkingFor(warmSpec(spec, runner.WarmArgv(spec.Argv[0]), p.cfg))
	p.mu.Unlock()
	tpl := p.template(f, start)
	if tpl == nil {
		p.unuse(f)
		return nil, nil, nil, nil
	}
	var j *sandbox.Jail
	var proc *sandbox.Process
	err := p.countFork(f, tpl, func() (err error) {
		j, proc, err = tpl.ForkKernel(ctx, spec, out, args, extra)
		return err
	})
	if err != nil {
		p.unuse(f)
		return nil, nil, nil, err
	}
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
