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

// forking is a kind's fork server, started on the kind's first build.
type forking struct {
	mu       sync.Mutex
	tpl      *sandbox.Template
	off      string // why this kind builds warm jails instead; "" while forking
	failures int    // forks failed in a row
	replaced int    // servers replaced for failing, since the last fork that worked
	closed   bool   // the kind was retired or the pool closed: start nothing
}

// templateSpec is the fork server of a kind: the kind's interpreter, mounts
// and environment, running the driver for each execution after importing
// cfg.Preload.
func templateSpec(k sandbox.Spec, cfg Config) sandbox.Spec {
	s := k
	s.Argv = runner.ForkServerArgv(k.Argv[0], runner.DriverSource(), cfg.Preload)
	s.Requests, s.ResultChannel, s.StreamChannel, s.Collect = false, false, false, nil
	// It lives as long as its kind, and its executions die with it: no
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
	tpl := p.template(k, true)
	if tpl == nil {
		return nil, false, nil
	}
	return p.forkFrom(k, tpl)
}

// forkNow forks an execution of k at once if its fork server is running:
// what a request that found no warm execution ready gets instead of a cold
// jail.
func (p *Pool) forkNow(k *kind) *warmJail {
	if !p.cfg.ForkServer {
		return nil
	}
	tpl := p.template(k, false)
	if tpl == nil {
		return nil
	}
	w, _, err := p.forkFrom(k, tpl)
	if err != nil {
		return nil
	}
	return w
}

// template returns k's running fork server, replacing a dead one and,
// with start, starting one; nil when k does not fork.
func (p *Pool) template(k *kind, start bool) *sandbox.Template {
	f := &k.fork
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.off != "" || f.closed {
		return nil
	}
	if f.tpl != nil {
		select {
		case <-f.tpl.Done(): // died: replace it
			p.cfg.Logger.Warn("fork server ended; starting a new one", "python", describe(k.spec))
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
		tpl, err := p.jails.StartTemplate(p.ctx, templateSpec(k.spec, p.cfg), p.templateOutput(k))
		if err != nil {
			p.forkServers.Add(-1)
			if p.ctx.Err() == nil {
				f.off = err.Error()
				p.cfg.Logger.Warn("no fork server for this kind: using warm jails", "python", describe(k.spec), "reason", err)
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

// forkFrom forks one execution of k from tpl. Forks of one server run
// concurrently; the server itself takes them one at a time.
func (p *Pool) forkFrom(k *kind, tpl *sandbox.Template) (*warmJail, bool, error) {
	r := &relay{}
	j, proc, err := tpl.Fork(p.ctx, k.spec, r.out)
	f := &k.fork
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		if f.tpl != tpl {
			return nil, true, err // a server already replaced: not held against the new one
		}
		f.failures++
		switch {
		case f.failures < forkFailLimit || f.off != "":
		case f.replaced < forkReplaceLimit:
			// A server whose forks keep failing is replaced.
			p.cfg.Logger.Warn("forking keeps failing: replacing the fork server", "python", describe(k.spec), "err", err)
			p.dropTemplate(f)
			f.failures = 0
			f.replaced++
		default:
			f.off = err.Error()
			p.cfg.Logger.Warn("forking keeps failing: using warm jails", "python", describe(k.spec), "err", err)
			p.dropTemplate(f)
		}
		return nil, true, err
	}
	f.failures, f.replaced = 0, 0
	return &warmJail{jail: j, proc: proc, relay: r, tpl: tpl}, true, nil
}

// templateOutput logs what a fork server prints (it never runs user code:
// anything it says is about preloading, such as matplotlib building its
// font cache), at debug level: it is the preloaded libraries' chatter,
// not the operator's concern.
func (p *Pool) templateOutput(k *kind) sandbox.OutputFunc {
	return func(s sandbox.Stream, b []byte) {
		p.cfg.Logger.Debug("fork server", "python", describe(k.spec), "stream", s.String(), "text", string(b))
	}
}

// closeFork ends k's fork server for good.
func (p *Pool) closeFork(k *kind) {
	f := &k.fork
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true // a build still running must not start another
	p.dropTemplate(f)
}

// memory is what k's fork server holds.
func (f *forking) memory() (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tpl == nil {
		return 0, false
	}
	return f.tpl.MemoryUsage(), true
}
