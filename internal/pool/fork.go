package pool

import (
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// forkFailLimit is how many forks of a kind may fail in a row before its
// fork server is replaced; after forkReplaceLimit replacements without a
// fork that worked, the kind builds warm jails instead.
const (
	forkFailLimit    = 3
	forkReplaceLimit = 2
)

// forking is a fork server, started on first use. Kinds and sessions that
// differ only in what their executions do (channels, collected files) but
// run the same interpreter with the same mounts and base environment share
// one (see forkingFor); it lives while any of them uses it, and for
// Config.Idle after the last one went (the janitor ends it then).
type forking struct {
	key      string
	spec     sandbox.Spec // a warm spec of its first user: what the server is built from
	uses     int          // kinds and live sessions using it; p.mu guards it
	lastUsed time.Time    // when a use was last taken or given back; p.mu guards it

	mu       sync.Mutex
	tpl      *sandbox.Template
	off      string // why its users build warm jails (or cold kernels) instead; "" while forking
	failures int    // forks failed in a row
	replaced int    // servers replaced for failing, since the last fork that worked
	closed   bool   // its last user went or the pool closed: start nothing
	// kernels are session kernels forked ahead, waiting for their session
	// (see ForkSession); preforking says one is being forked.
	kernels    []*warmJail
	preforking bool
}

// forkingFor returns the fork server of warm spec ws, creating its entry
// (not the server) on first use, and counts one more use. p.mu is held.
func (p *Pool) forkingFor(ws sandbox.Spec) *forking {
	key := kindKey(templateSpec(ws, p.cfg))
	f, ok := p.forks[key]
	if !ok {
		f = &forking{key: key, spec: ws}
		p.forks[key] = f
	}
	f.uses++
	f.lastUsed = time.Now()
	return f
}

// unuse gives back one use of f; a fork server nobody uses is ended by
// the janitor once it has been idle for Config.Idle.
func (p *Pool) unuse(f *forking) {
	p.mu.Lock()
	f.uses--
	f.lastUsed = time.Now()
	p.mu.Unlock()
}

// idleForks removes from the pool the fork servers nobody has used for
// Config.Idle and returns them for the caller to close. p.mu is held.
func (p *Pool) idleForks() []*forking {
	var out []*forking
	for key, f := range p.forks {
		if f.uses == 0 && time.Since(f.lastUsed) >= p.cfg.Idle {
			delete(p.forks, key)
			out = append(out, f)
		}
	}
	return out
}

// templateSpec is the fork server of a kind: the kind's interpreter, mounts
// and environment, running the driver for each execution after importing
// cfg.Preload.
func templateSpec(k sandbox.Spec, cfg Config) sandbox.Spec {
	s := k
	s.Argv = runner.ForkServerArgv(k.Argv[0], runner.DriverSource(), cfg.Preload)
	s.Requests, s.ResultChannel, s.StreamChannel, s.Collect = false, false, false, nil
	// It lives as long as its users, and its executions die with it: no
	// time limit may end it mid-execution. Each fork counts against its
	// tasks until the execution is moved to its own cgroup.
	s.Limits.WallTime, s.Limits.CPUTime = templateLifetime, templateLifetime
	s.Limits.Pids += templatePids
	return s
}

// templateLifetime bounds a fork server's wall and CPU time (there is no
// "unlimited"); templatePids is room for executions being forked.
const (
	templateLifetime = 100_000 * time.Hour
	templatePids     = 512
)

// fork builds one warm execution of k by forking its fork server, starting
// the server first when it is not running. It returns ok false when k does
// not fork (any more): the caller then builds a warm jail.
func (p *Pool) fork(k *kind) (w *warmJail, ok bool, err error) {
	tpl := p.template(k.fork, true)
	if tpl == nil {
		return nil, false, nil
	}
	return p.forkWarm(k, tpl)
}

// forkNow forks an execution of k at once if its fork server is running:
// what a request that found no warm execution ready gets instead of a cold
// jail.
func (p *Pool) forkNow(k *kind) *warmJail {
	if k.fork == nil {
		return nil
	}
	tpl := p.template(k.fork, false)
	if tpl == nil {
		return nil
	}
	w, _, err := p.forkWarm(k, tpl)
	if err != nil {
		return nil
	}
	return w
}

// template returns f's running fork server, replacing a dead one and,
// with start, starting one; nil when f does not fork.
func (p *Pool) template(f *forking, start bool) *sandbox.Template {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.off != "" || f.closed {
		return nil
	}
	if f.tpl != nil {
		select {
		case <-f.tpl.Done(): // died: replace it
			p.cfg.Logger.Warn("fork server ended; starting a new one", "python", describe(f.spec))
			p.dropTemplate(f)
		default:
		}
	}
	if f.tpl == nil && start {
		// At most MaxForkServers run at once: a kind beyond them builds
		// warm jails until one ends.
		if p.forkServers.Add(1) > int64(p.cfg.MaxForkServers) {
			p.forkServers.Add(-1)
			return nil
		}
		tpl, err := p.jails.StartTemplate(p.ctx, templateSpec(f.spec, p.cfg), p.templateOutput(f.spec))
		if err != nil {
			p.forkServers.Add(-1)
			if p.ctx.Err() == nil {
				f.off = err.Error()
				p.cfg.Logger.Warn("no fork server for this kind: using warm jails", "python", describe(f.spec), "reason", err)
			}
			return nil
		}
		f.tpl = tpl
	}
	return f.tpl
}

// dropTemplate ends f's fork server; f.mu is held.
func (p *Pool) dropTemplate(f *forking) {
	if f.tpl == nil {
		return
	}
	f.tpl.Close()
	f.tpl = nil
	p.forkServers.Add(-1)
}

// forkWarm forks one warm execution of k from tpl.
func (p *Pool) forkWarm(k *kind, tpl *sandbox.Template) (*warmJail, bool, error) {
	r := &relay{}
	var j *sandbox.Jail
	var proc *sandbox.Process
	err := p.countFork(k.fork, tpl, func() (err error) {
		j, proc, err = tpl.Fork(p.ctx, k.spec, r.out)
		return err
	})
	if err != nil {
		return nil, true, err
	}
	return &warmJail{jail: j, proc: proc, relay: r, tpl: tpl}, true, nil
}

// countFork runs fork, one fork from f's server tpl, and keeps f's count of
// failures: a server whose forks keep failing is replaced, and after
// forkReplaceLimit replacements f's users stop forking. Forks of one
// server run concurrently; the server itself takes them one at a time.
func (p *Pool) countFork(f *forking, tpl *sandbox.Template, fork func() error) error {
	err := fork()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		if f.tpl != tpl {
			return err // a server already replaced: not held against the new one
		}
		f.failures++
		switch {
		case f.failures < forkFailLimit || f.off != "":
		case f.replaced < forkReplaceLimit:
			// A server whose forks keep failing is replaced.
			p.cfg.Logger.Warn("forking keeps failing: replacing the fork server", "python", describe(f.spec), "err", err)
			p.dropTemplate(f)
			f.failures = 0
			f.replaced++
		default:
			f.off = err.Error()
			p.cfg.Logger.Warn("forking keeps failing: using warm jails", "python", describe(f.spec), "err", err)
			p.dropTemplate(f)
		}
		return err
	}
	f.failures, f.replaced = 0, 0
	return nil
}

// templateOutput logs what a fork server prints (it never runs user code:
// anything it says is about preloading, such as matplotlib building its
// font cache), at debug level: it is the preloaded libraries' chatter,
// not the operator's concern.
func (p *Pool) templateOutput(spec sandbox.Spec) sandbox.OutputFunc {
	return func(s sandbox.Stream, b []byte) {
		p.cfg.Logger.Debug("fork server", "python", describe(spec), "stream", s.String(), "text", string(b))
	}
}

// closeFork ends f's fork server for good, with the kernels it forked
// ahead.
func (p *Pool) closeFork(f *forking) {
	f.mu.Lock()
	f.closed = true // a build or session still starting must not start another
	kernels := f.kernels
	f.kernels = nil
	p.dropTemplate(f)
	f.mu.Unlock()
	for _, w := range kernels {
		w.discard()
	}
}

// memory is what f's fork server holds.
func (f *forking) memory() (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tpl == nil {
		return 0, false
	}
	return f.tpl.MemoryUsage(), true
}
