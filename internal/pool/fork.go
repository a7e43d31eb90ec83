package pool

import (
	"sync"
	"sync/atomic"
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

// forking is the fork server of an environment, started on first use.
// Kinds and sessions that differ only in what their executions do
// (channels, collected files) but run the same interpreter with the same
// mounts and base environment share one (see forkingFor); it lives while
// any of them uses it, and for Config.Idle after the last one went (the
// janitor ends it then).
//
// Where the environment has some of Config.Preload, a forking runs up to
// two servers: the full one, which imported them, for executions that may
// use them and for sessions; and a lean one, which imported none, for code
// that needs only the standard library (runner.Lean): forking an
// interpreter that holds numpy, pandas and matplotlib costs ten times the
// page-table work of forking a bare one. Where it has none, the one server
// there is serves both.
type forking struct {
	key      string
	spec     sandbox.Spec // a warm spec of its first user: what the server is built from
	uses     int          // kinds and live sessions using it; p.mu guards it
	lastUsed time.Time    // when a use was last taken or given back; p.mu guards it
	// bare is set when the first of its servers to start reported that
	// the environment has none of Config.Preload: lean code then forks
	// from the full server, and runs in kinds of any code. Written under
	// mu, read without it (a request's kind must not wait for a server
	// that ends under mu).
	bare atomic.Bool
	// precopy is how many bytes each execution of the full server copies
	// ahead (sandbox.Template.Precopy), as its latest start reported.
	// Written under mu, read without it, as bare: a request must not wait
	// for a server that ends under mu to learn it.
	precopy atomic.Int64

	mu     sync.Mutex
	full   server
	lean   server
	known  bool // the first of its servers started and reported (see bare)
	closed bool // its last user went or the pool closed: start nothing
	// kernels are session kernels forked ahead, waiting for their session
	// (see ForkSession); preforking says one is being forked.
	kernels    []*warmJail
	preforking bool
}

// server is one fork server of a forking; its forking's mu guards it.
type server struct {
	tpl      *sandbox.Template
	starting chan struct{} // closed when the start in progress ends; nil: none
	off      string        // why its users do without it; "" while forking
	failures int           // forks failed in a row
	replaced int           // servers replaced for failing, since the last fork that worked
	// inUse counts the executions forked from tpl that run (see hold): a
	// lean server is retired to make room only while it has none.
	inUse int
	// slots is the count tpl holds a place in while it runs or starts
	// (see serverSlots).
	slots *atomic.Int64
}

// forkingFor returns the fork server of warm spec ws, creating its entry
// (not the server) on first use, and counts one more use. p.mu is held.
func (p *Pool) forkingFor(ws sandbox.Spec) *forking {
	key := p.kindKey(templateSpec(ws, p.cfg, false))
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
// cfg.Preload (lean: after finding out which of them the environment has).
func templateSpec(k sandbox.Spec, cfg Config, lean bool) sandbox.Spec {
	s := k
	switch {
	case lean:
		s.Argv = runner.LeanForkServerArgv(k.Argv[0], cfg.Preload)
	case cfg.PrecopyProbe != 0:
		s.Argv = runner.ProbingForkServerArgv(k.Argv[0], cfg.PrecopyProbe, cfg.Preload)
	default:
		s.Argv = runner.ForkServerArgv(k.Argv[0], cfg.Preload)
	}
	s.Stdin = runner.ForkServerStdin(runner.DriverSource())
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
	tpl, bare := p.template(k.fork, k.lean, true)
	if tpl == nil {
		return nil, false, nil
	}
	return p.forkWarm(k, tpl, bare, !k.lean)
}

// forkNow forks an execution of k at once if its fork server is running:
// what a request that found no warm execution ready gets instead of a cold
// jail. It copies nothing ahead: a request waits for it, and the copies
// would only move onto that request's path.
func (p *Pool) forkNow(k *kind) *warmJail {
	if k.fork == nil {
		return nil
	}
	tpl, bare := p.template(k.fork, k.lean, false)
	if tpl == nil {
		return nil
	}
	w, _, err := p.forkWarm(k, tpl, bare, false)
	if err != nil {
		return nil
	}
	return w
}

// pick is the server of f that lean code (or, !lean, any) forks from: the
// lean one while the environment may have preloads and the lean one can
// run, else the full one. f.mu is held.
func (f *forking) pick(lean bool) *server {
	if lean && f.lean.off == "" && !f.bare.Load() {
		return &f.lean
	}
	return &f.full
}

// holding is the server of f running tpl; nil when tpl was replaced.
// f.mu is held.
func (f *forking) holding(tpl *sandbox.Template) *server {
	switch tpl {
	case f.full.tpl:
		return &f.full
	case f.lean.tpl:
		return &f.lean
	}
	return nil
}

// template returns the running fork server of f for lean code or (!lean)
// any code, replacing a dead one and, with start, starting one (or waiting
// for the one being started); nil when f does not fork. Lean code that
// gets no lean server (--fork-servers leaves no room, or it failed) forks
// from the full one, as any code. bare says the server imported none of
// the preloads. f.mu is not held while a server starts (importing pandas
// takes seconds): the other server of f goes on forking meanwhile.
func (p *Pool) template(f *forking, lean, start bool) (tpl *sandbox.Template, bare bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for !f.closed {
		s := f.pick(lean)
		tpl, again := p.running(f, s, start)
		switch {
		case tpl != nil:
			return tpl, f.bareServer(tpl)
		case again:
		case start && s == &f.lean && p.ctx.Err() == nil:
			lean = false
		default:
			return nil, false
		}
	}
	return nil, false
}

// running returns f's server s if it runs, replacing it if it died and,
// with start, starting it; nil when it does not run (again: look again,
// after waiting for the start another caller made, because the full
// server serves instead, or because a lean server made room). f.mu is
// held, but not while waiting or starting.
func (p *Pool) running(f *forking, s *server, start bool) (tpl *sandbox.Template, again bool) {
	if s.off != "" {
		return nil, false
	}
	if s.tpl != nil {
		select {
		case <-s.tpl.Done():
			p.cfg.Logger.Warn("fork server ended; starting a new one", "python", describe(f.spec), "lean", s == &f.lean)
			p.dropServer(s)
		default:
			return s.tpl, false
		}
	}
	switch {
	case !start:
		return nil, false
	case s.starting != nil:
		// The start may find the environment without preloads: the caller
		// looks again.
		ch := s.starting
		f.mu.Unlock()
		select {
		case <-ch:
		case <-p.ctx.Done():
		}
		f.mu.Lock()
		return nil, p.ctx.Err() == nil
	}
	return p.startServer(f, s)
}

// bareServer reports whether f's server tpl imported none of the
// preloads: its lean one, or one in an environment without them. f.mu is
// held.
func (f *forking) bareServer(tpl *sandbox.Template) bool {
	return tpl == f.lean.tpl || len(tpl.Preloads()) == 0
}

// startServer starts the fork server s of f, with f.mu held on entry and
// return but not in between; nil when it could not, or, with again, when
// f's full server serves instead (see below) or a lean server was retired
// to make room for it (see retireLean).
func (p *Pool) startServer(f *forking, s *server) (_ *sandbox.Template, again bool) {
	// At most MaxForkServers run at once (network kinds' apart): a kind
	// beyond them builds warm jails until one ends, or a lean server
	// makes room for a full one.
	slots, limit := p.serverSlots(f)
	if slots.Add(1) > int64(limit) {
		slots.Add(-1)
		return nil, s == &f.full && p.retireLean(f)
	}
	s.slots = slots
	ch := make(chan struct{})
	s.starting = ch
	spec := templateSpec(f.spec, p.cfg, s == &f.lean)
	f.mu.Unlock()
	tpl, err := p.jails.StartTemplate(p.ctx, spec, p.templateOutput(f.spec))
	f.mu.Lock()
	s.starting = nil
	close(ch)
	switch {
	case err != nil:
		slots.Add(-1)
		s.slots = nil
		if p.ctx.Err() == nil {
			s.off = err.Error()
			p.cfg.Logger.Warn("no fork server for this kind: using warm jails", "python", describe(f.spec), "lean", s == &f.lean, "reason", err)
		}
		return nil, false
	case f.closed: // its users went, or the pool closed, while it started
		s.tpl = tpl
		p.dropServer(s)
		return nil, false
	}
	s.tpl = tpl
	n, off := tpl.Precopy()
	if s == &f.full {
		f.precopy.Store(n)
	}
	if off != "" {
		p.cfg.Logger.Warn("fork server: its executions copy nothing ahead", "python", describe(f.spec), "reason", off)
	} else if n > 0 {
		p.cfg.Logger.Info("fork server: each execution copies ahead what executions write", "python", describe(f.spec), "bytes", n)
	}
	if !f.known {
		f.known = true
		f.bare.Store(len(tpl.Preloads()) == 0)
	}
	if s == &f.lean && f.bare.Load() {
		// The environment has none of the preloads: this server is what
		// the full one would be, and serves as it; or, when the full one
		// started meanwhile, it goes and the full one serves lean code.
		if f.full.tpl != nil || f.full.starting != nil || f.full.off != "" {
			p.dropServer(s)
			return nil, true
		}
		f.full.tpl, f.lean.tpl = tpl, nil
		f.full.slots, f.lean.slots = f.lean.slots, nil
	}
	return tpl, false
}

// retireLean ends a lean fork server that runs no execution, f's own or
// another environment's, to make room for f's full one: pandas code then
// forks, and that lean server's code forks from its full server. It
// reports whether one ended. f.mu is held on entry and return, not in
// between.
func (p *Pool) retireLean(f *forking) bool {
	f.mu.Unlock()
	defer f.mu.Lock()
	p.mu.Lock()
	all := []*forking{f}
	for _, g := range p.forks {
		// Only a server of the same places makes room.
		if g != f && g.spec.Network == f.spec.Network {
			all = append(all, g)
		}
	}
	p.mu.Unlock()
	for _, g := range all {
		g.mu.Lock()
		idle := g.lean.tpl != nil && g.lean.inUse == 0
		if idle {
			p.cfg.Logger.Info("ending an idle lean fork server to make room for a full one", "python", describe(f.spec), "lean", describe(g.spec))
			p.dropServer(&g.lean)
		}
		g.mu.Unlock()
		if idle {
			return true
		}
	}
	return false
}

// copiesTooMuchFor reports whether k's warm executions copy ahead more
// than an execution with memory limit mem may hold before its code runs
// (sandbox.PrecopyFits): handing one such a limit could end it at once.
func (p *Pool) copiesTooMuchFor(k *kind, mem int64) bool {
	if k.fork == nil || k.lean {
		return false
	}
	n := k.fork.precopy.Load()
	return n > 0 && !sandbox.PrecopyFits(n, mem)
}

// dropServer ends the fork server s; its forking's mu is held.
func (p *Pool) dropServer(s *server) {
	if s.tpl == nil {
		return
	}
	s.tpl.Close()
	s.tpl, s.inUse = nil, 0
	s.slots.Add(-1)
	s.slots = nil
}

// serverSlots returns the count of running fork servers that f's servers
// take a place in, and its limit: network kinds' servers have places of
// their own (NetworkMax), so that a server's first execution with network
// never leaves one of its other kinds without a fork server, nor the
// other way round.
func (p *Pool) serverSlots(f *forking) (*atomic.Int64, int) {
	if f.spec.Network {
		return &p.networkForkServers, p.cfg.NetworkMax
	}
	return &p.forkServers, p.cfg.MaxForkServers
}

// hold counts w, about to run, as an execution of the fork server of f it
// was forked from, until unhold: that server is not retired under it. It
// reports false, and lets w go, when that server ended already (w ends
// with it).
func (p *Pool) hold(f *forking, w *warmJail) bool {
	if w.tpl == nil {
		return true
	}
	f.mu.Lock()
	s := f.holding(w.tpl)
	if s != nil {
		s.inUse++
	}
	f.mu.Unlock()
	if s == nil {
		w.proc.Kill()
		p.jails.Release(w.jail)
	}
	return s != nil
}

// unhold ends what hold counted.
func (p *Pool) unhold(f *forking, w *warmJail) {
	if w.tpl == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.holding(w.tpl); s != nil {
		s.inUse--
	}
}

// forkWarm forks one warm execution of k from tpl (bare: a server that
// imported none of the preloads); copyAhead: one that copies ahead what
// executions of tpl write (see sandbox.Template.Fork).
func (p *Pool) forkWarm(k *kind, tpl *sandbox.Template, bare, copyAhead bool) (*warmJail, bool, error) {
	r := &relay{}
	var j *sandbox.Jail
	var proc *sandbox.Process
	fork := tpl.ForkBare
	if copyAhead {
		fork = tpl.Fork
	}
	err := p.countFork(k.fork, tpl, func() (err error) {
		j, proc, err = fork(p.ctx, k.spec, r.out)
		return err
	})
	if err != nil {
		return nil, true, err
	}
	n, _ := tpl.Precopy()
	precopied := copyAhead && sandbox.PrecopyFits(n, k.spec.Limits.WithDefaults().MemoryBytes)
	w := &warmJail{jail: j, proc: proc, relay: r, tpl: tpl, bare: bare, precopied: precopied}
	p.prepareLink(w, k.spec)
	return w, true, nil
}

// countFork runs fork, one fork from f's server tpl, and keeps that
// server's count of failures: a server whose forks keep failing is
// replaced, and after forkReplaceLimit replacements its users stop forking
// from it (lean code then forks from the full server). Forks of one server
// run concurrently; the server itself takes them one at a time.
func (p *Pool) countFork(f *forking, tpl *sandbox.Template, fork func() error) error {
	err := fork()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.holding(tpl)
	if s == nil {
		return err // a server already replaced: not held against the new one
	}
	if err != nil {
		s.failures++
		switch {
		case s.failures < forkFailLimit || s.off != "":
		case s.replaced < forkReplaceLimit:
			// A server whose forks keep failing is replaced.
			p.cfg.Logger.Warn("forking keeps failing: replacing the fork server", "python", describe(f.spec), "lean", s == &f.lean, "err", err)
			p.dropServer(s)
			s.failures = 0
			s.replaced++
		default:
			s.off = err.Error()
			p.cfg.Logger.Warn("forking keeps failing: no longer forking from this server", "python", describe(f.spec), "lean", s == &f.lean, "err", err)
			p.dropServer(s)
		}
		return err
	}
	s.failures, s.replaced = 0, 0
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

// closeFork ends f's fork servers for good, with the kernels it forked
// ahead.
func (p *Pool) closeFork(f *forking) {
	f.mu.Lock()
	f.closed = true // a build or session still starting must not start another
	kernels := f.kernels
	f.kernels = nil
	p.dropServer(&f.full)
	p.dropServer(&f.lean)
	f.mu.Unlock()
	for _, w := range kernels {
		w.discard()
	}
}

// memory is what f's fork servers hold, and how many run.
func (f *forking) memory() (mem int64, running int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range []*server{&f.full, &f.lean} {
		if s.tpl != nil {
			mem += s.tpl.MemoryUsage()
			running++
		}
	}
	return mem, running
}
