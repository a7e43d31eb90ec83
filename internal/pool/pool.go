package pool

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Jails is what the pool needs of the jail manager; *sandbox.Manager
// implements it.
type Jails interface {
	Run(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc) (sandbox.Result, error)
	Prepare(ctx context.Context, base sandbox.Base) (*sandbox.Jail, error)
	Release(j *sandbox.Jail)
	StartTemplate(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc) (*sandbox.Template, error)
}

var _ Jails = (*sandbox.Manager)(nil)

// Config sizes the pool.
type Config struct {
	// BaseEnv is the environment warm drivers start with: the engine's
	// base environment. A request's additions travel in its request.
	BaseEnv []string
	// Ceilings are the limits warm jails start with. A request may ask for
	// less of anything (the hand-off tightens), never for more; its open
	// files, file size and output caps must equal these.
	Ceilings sandbox.Limits
	// ScratchBytes is the size a warm jail's /work and /tmp start with
	// (default and at most Ceilings.WorkspaceBytes): the size most requests
	// ask for, so that their hand-off has no mount to resize; one asking
	// for more, up to the ceiling, has them grown at its hand-off.
	ScratchBytes int64
	// Min is how many warm jails a kind keeps while it is in use; Max is
	// how many it may grow to under demand. Defaults 1 and 4.
	Min, Max int
	// MaxWarm bounds the warm jails of all kinds together (default 8): the
	// memory idle jails hold is bounded by MaxWarm × a jail's idle size.
	MaxWarm int
	// Idle is how long a kind stays warm without use (default 5 minutes).
	Idle time.Duration
	// NetworkMax is how many warm jails a kind with network (each its
	// own network namespace, the execution's egress attached at hand-off)
	// may grow to, at most Max (default 2); how many shapes of kinds with
	// network the pool keeps (their key holds things of the request, such
	// as its collect globs; a shape is a kind for any code and its kind
	// for code that needs only the standard library): so at most
	// 2·NetworkMax² warm jails with network; and how many fork servers
	// kinds with network run, apart from MaxForkServers. An execution with
	// network of a further shape runs cold until one is retired (Idle).
	// Such a kind starts, like any, on its first execution: a server whose
	// requests never ask for network holds none.
	NetworkMax int
	// ForkServer builds a kind's warm executions by forking a fork server
	// (sandbox.Template) started for the kind, instead of a jail each: a
	// few milliseconds of CPU instead of an interpreter start. A kind whose
	// fork server cannot run (no root, Python < 3.9, repeated failures)
	// builds warm jails.
	ForkServer bool
	// Preload are the modules a fork server imports once, where its
	// environment has them (serve's default: numpy, pandas, matplotlib).
	Preload []string
	// TrustedMount reports whether the directory a jail mounts holds only
	// what the operator chose (an interpreter, the base environment). A
	// fork server runs its environment's site hooks (.pth files) and
	// preloads as root with capabilities and no seccomp filter, before any
	// execution's confinement: code with any other mount (an environment
	// a request's requirements built) gets warm jails, whose interpreter
	// starts confined. nil: only code without mounts forks.
	TrustedMount func(dir string) bool
	// MaxForkServers bounds the fork servers running at once, all kinds
	// without network together (default 4): each holds an interpreter
	// and its preloads (20–120 MiB). A kind beyond them builds warm
	// jails; a full server beyond them takes the place of a lean one that
	// runs no execution. Kinds with network have NetworkMax fork servers
	// of their own, apart from these.
	MaxForkServers int
	// PrecopyProbe bounds the probe a fork server with preloads runs at
	// its start to learn which pages its executions write, which each
	// execution then copies while it waits for its request (see
	// runner.ProbingForkServerArgv); 0 means 20 s, less than 0 no probe
	// and no copying ahead. A probe that fails leaves the server serving,
	// without copying ahead.
	PrecopyProbe time.Duration
	// Logger receives refill failures; nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Min <= 0 {
		c.Min = 1
	}
	if c.Max < c.Min {
		c.Max = max(4, c.Min)
	}
	if c.MaxWarm <= 0 {
		c.MaxWarm = 8
	}
	if c.NetworkMax <= 0 {
		c.NetworkMax = 2
	}
	c.NetworkMax = min(c.NetworkMax, c.Max)
	if c.Idle <= 0 {
		c.Idle = 5 * time.Minute
	}
	if c.MaxForkServers <= 0 {
		c.MaxForkServers = 4
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Ceilings = c.Ceilings.WithDefaults()
	if c.ScratchBytes <= 0 || c.ScratchBytes > c.Ceilings.WorkspaceBytes {
		c.ScratchBytes = c.Ceilings.WorkspaceBytes
	}
	return c
}

// Pool runs payloads, in a warm jail when one fits. It implements the
// engine's Runner. Close stops refilling and destroys the warm jails.
type Pool struct {
	jails Jails
	cfg   Config

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	kinds    map[string]*kind
	forks    map[string]*forking       // fork servers by what they are built from
	sessions map[*sessionFork]struct{} // session kernels forked, live
	warm     int                       // warm jails of all kinds, ready or being built

	builds chan struct{} // bounds warm jails being built at once

	hits, misses, cold, forked, lean, network atomic.Int64
	forkServers                               atomic.Int64 // running or starting, kinds without network
	networkForkServers                        atomic.Int64 // running or starting, kinds with network

	driverSum [sha256.Size]byte // of runner.DriverSource(), for kindKey
}

// New starts a pool over jails. Nothing is built until a kind is first used.
func New(jails Jails, cfg Config) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{jails: jails, cfg: cfg.withDefaults(), ctx: ctx, cancel: cancel, kinds: map[string]*kind{},
		forks: map[string]*forking{}, sessions: map[*sessionFork]struct{}{}, builds: make(chan struct{}, runtime.NumCPU()),
		driverSum: sha256.Sum256([]byte(runner.DriverSource()))}
	p.wg.Add(1)
	go p.janitor()
	return p
}

// Stats describe the pool for metrics.
type Stats struct {
	Kinds      int   // kinds kept warm
	Warm       int   // warm jails ready to take (forked ones and session kernels forked ahead included)
	WarmMemory int64 // bytes those jails hold
	Forked     int   // of Warm, executions forked from a fork server
	ForkMemory int64 // of WarmMemory, what those forked executions hold
	// Precopied are, of Forked, executions that copied ahead the pages
	// their fork server's probe found executions write (servers with
	// preloads); PrecopyMemory is, of ForkMemory, what they hold.
	Precopied     int
	PrecopyMemory int64
	Templates     int // fork servers running
	// TemplateMemory is what the fork servers hold: interpreters with
	// their preloads, shared copy-on-write with every forked execution.
	TemplateMemory int64
	// Sessions are the session kernels forked from a fork server, alive;
	// SessionMemory what they hold of their own (each keeps its fork
	// server, counted in TemplateMemory, running).
	Sessions      int
	SessionMemory int64
	ForkedRuns    int64 // executions served by a forked execution
	// LeanRuns are, of ForkedRuns, those whose code needs only the
	// standard library (runner.Lean), forked from a server that imported
	// none of the preloads.
	LeanRuns int64
	// NetworkRuns are, of Hits, executions with network: a warm jail with
	// a network namespace of its own, the execution's egress attached to
	// it at hand-off.
	NetworkRuns int64
	Hits        int64 // executions that took a warm jail
	Misses      int64 // executions of a pooled kind that found none ready
	Cold        int64 // executions that could not use the pool at all
	BuildFailed int64 // warm jails that failed to build
}

// Stats reports the pool's current state.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	s := Stats{Kinds: len(p.kinds), Hits: p.hits.Load(), Misses: p.misses.Load(), Cold: p.cold.Load(), ForkedRuns: p.forked.Load(), LeanRuns: p.lean.Load(),
		NetworkRuns: p.network.Load()}
	var ready []*warmJail
	var forks []*forking
	var sessions []*sessionFork
	for _, k := range p.kinds {
		ready = append(ready, k.ready...)
		s.BuildFailed += k.failed
	}
	for _, f := range p.forks {
		forks = append(forks, f)
	}
	for sf := range p.sessions {
		sessions = append(sessions, sf)
	}
	p.mu.Unlock()
	for _, w := range ready {
		s.Warm++
		mem := w.proc.MemoryUsage()
		s.WarmMemory += mem
		if w.tpl != nil {
			s.Forked++
			s.ForkMemory += mem
		}
		if w.precopied {
			s.Precopied++
			s.PrecopyMemory += mem
		}
	}
	for _, f := range forks {
		mem, running := f.memory()
		s.Templates += running
		s.TemplateMemory += mem
		for _, w := range f.readyKernels() {
			mem := w.proc.MemoryUsage()
			s.Warm++
			s.Forked++
			s.WarmMemory += mem
			s.ForkMemory += mem
		}
	}
	for _, sf := range sessions {
		s.Sessions++
		s.SessionMemory += sf.proc.MemoryUsage()
	}
	return s
}

// Run runs spec: in a warm jail of its kind when it fits one, else cold.
func (p *Pool) Run(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc) (sandbox.Result, error) {
	if err := spec.Validate(); err != nil {
		return sandbox.Result{}, err
	}
	warmArgv, request, ok := runner.Warm(spec.Argv, spec.Env, p.cfg.BaseEnv)
	// An execution with a workspace runs cold: it must be mounted before
	// the payload confines itself, which a warm one did already (see
	// sandbox's slots_linux.go). One with network takes a warm jail of
	// its own (network.go), or runs cold without an egress to attach.
	if !ok || (spec.Network && spec.Egress == nil) || spec.Workspace != nil || !p.fits(spec.Limits.WithDefaults()) {
		p.cold.Add(1)
		return p.jails.Run(ctx, spec, out)
	}
	lean := p.leanCode(spec)
	k := p.kind(warmSpec(spec, warmArgv, p.cfg), lean)
	if k == nil { // network kinds are all taken, or the pool is closing (kind.go)
		p.cold.Add(1)
		return p.jails.Run(ctx, spec, out)
	}
	var w *warmJail
	if !p.copiesTooMuchFor(k, spec.Limits.WithDefaults().MemoryBytes) {
		var later bool
		w, later = p.take(k)
		if later {
			defer kick(k.refill)
		}
	}
	if w == nil {
		// None ready, or its warm executions hold the pages they copied
		// ahead, too much of this one's memory limit: one that copies
		// nothing is forked for it.
		w = p.forkNow(k)
	}
	if w != nil && !p.hold(k.fork, w) {
		w = nil // its fork server was retired meanwhile
	}
	if w == nil {
		p.misses.Add(1)
		return p.jails.Run(ctx, spec, out)
	}
	// drop gives w up before a cold retry, so that a dead warm jail's
	// cgroup and namespaces are not held for the whole cold run.
	drop := func() {
		w.proc.Kill()
		w.proc.Wait()
		p.unhold(k.fork, w)
		p.jails.Release(w.jail)
	}
	if w.dead() {
		// Died since take: nothing is attached yet, so the cold run can
		// still attach this execution's egress.
		drop()
		p.misses.Add(1)
		return p.jails.Run(ctx, spec, out)
	}
	if err := attachEgress(w, spec); err != nil {
		// Nothing of the execution ran, and the egress serves no device
		// (Serve failed or was never called). A jail made for it alone
		// attaches it again, and fails closed with the reason if that
		// fails too.
		p.cfg.Logger.Warn("attaching an egress to a warm jail; running cold", "python", describe(k.spec), "err", err)
		drop()
		p.misses.Add(1)
		return p.jails.Run(ctx, spec, out)
	}
	res, err := w.run(ctx, spec, request, out)
	// Every process of w is gone once run returns.
	p.unhold(k.fork, w)
	p.jails.Release(w.jail)
	if errors.Is(err, errHandOff) {
		// It died waiting (its fork server ended, say): the execution
		// never started.
		p.cfg.Logger.Warn("a warm jail was gone at hand-off", "python", describe(k.spec), "network", spec.Network, "err", err)
		p.misses.Add(1)
		if spec.Network {
			// Its egress already serves the dead jail's device and serves
			// one device in its life: a cold run could not attach it.
			// The execution fails closed, saying so.
			return sandbox.Result{Status: sandbox.StatusSetupError, ExitCode: -1,
				Reason: "the warm execution ended after its egress was attached and before its code ran; nothing ran, try again"}, nil
		}
		return p.jails.Run(ctx, spec, out)
	}
	p.hits.Add(1)
	if spec.Network {
		p.network.Add(1)
	}
	if w.tpl != nil {
		p.forked.Add(1)
		if lean && w.bare {
			p.lean.Add(1)
		}
	}
	return res, err
}

// forkable reports whether executions of spec may fork from a fork
// server: every directory it mounts is trusted (Config.TrustedMount).
func (p *Pool) forkable(spec sandbox.Spec) bool {
	for _, m := range spec.Mounts {
		if p.cfg.TrustedMount == nil || !p.cfg.TrustedMount(m.Source) {
			return false
		}
	}
	return true
}

// leanCode reports whether spec's execution may fork from a server that
// imported none of the preloads, as far as a quick look at its code can
// tell: its workspace is one file, the entry point, importing only the
// standard library (runner.Lean). Code that imports a preloaded module all
// the same just imports it itself.
func (p *Pool) leanCode(spec sandbox.Spec) bool {
	return p.cfg.ForkServer && len(p.cfg.Preload) > 0 && len(spec.Files) == 1 &&
		runner.Lean(spec.Argv, spec.Files[0].Path, spec.Files[0].Data)
}

// fits reports whether limits l can be handed to a jail started with the
// pool's ceilings.
func (p *Pool) fits(l sandbox.Limits) bool {
	c := p.cfg.Ceilings
	return l.MemoryBytes <= c.MemoryBytes && l.Pids <= c.Pids && l.CPUs <= c.CPUs &&
		l.WorkspaceBytes <= c.WorkspaceBytes && l.WorkspaceInodes <= c.WorkspaceInodes && l.ShmBytes <= c.ShmBytes &&
		l.OpenFiles == c.OpenFiles && l.FileSizeBytes == c.FileSizeBytes &&
		l.StdoutBytes == c.StdoutBytes && l.StderrBytes == c.StderrBytes
}

// warmSpec is the spec a warm jail of spec's kind starts with.
func warmSpec(spec sandbox.Spec, argv []string, cfg Config) sandbox.Spec {
	l := cfg.Ceilings
	l.WorkspaceBytes = cfg.ScratchBytes
	// A warm jail may wait long; its clock restarts at the hand-off.
	l.WallTime, l.CPUTime = 24*time.Hour, 24*time.Hour
	return sandbox.Spec{
		Argv:          argv,
		Env:           cfg.BaseEnv,
		Dir:           spec.Dir,
		Mounts:        spec.Mounts,
		Network:       spec.Network,
		Limits:        l,
		ResultChannel: spec.ResultChannel,
		StreamChannel: spec.StreamChannel,
		Collect:       spec.Collect,
		Requests:      true,
	}
}

// kindKey names the kind of a warm spec: everything fixed at start. Each
// field goes into the hash with its length, unquoted. This runs for every
// request, and the argv carries the whole driver source (≈ 31 KB): that
// field goes in as p.driverSum behind a length no string has, instead of
// being copied and hashed again (≈ 40 µs and 33 KB a request).
func (p *Pool) kindKey(s sandbox.Spec) string {
	h := sha256.New()
	driver := runner.DriverSource()
	field := func(v string) {
		var n [8]byte
		if v == driver { // the same string: compared by its pointer first
			binary.LittleEndian.PutUint64(n[:], math.MaxUint64)
			h.Write(n[:])
			h.Write(p.driverSum[:])
			return
		}
		binary.LittleEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		io.WriteString(h, v)
	}
	list := func(tag string, vs []string) {
		field(tag)
		field(strconv.Itoa(len(vs)))
		for _, v := range vs {
			field(v)
		}
	}
	list("argv", s.Argv)
	list("env", s.Env)
	field(s.Dir)
	mounts := make([]string, 0, 2*len(s.Mounts))
	for _, m := range s.Mounts {
		mounts = append(mounts, m.Source, m.Target)
	}
	list("mounts", mounts)
	field(fmt.Sprintf("%v %v %v", s.Network, s.ResultChannel, s.StreamChannel))
	if s.Collect != nil {
		globs := append([]string(nil), s.Collect.Globs...)
		sort.Strings(globs)
		list("collect", globs)
		field(fmt.Sprintf("%d %d", s.Collect.MaxFiles, s.Collect.MaxBytes))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Close stops the refills and destroys every warm jail and fork server
// (with the executions and session kernels forked from it); it returns
// once their cgroups are removed.
func (p *Pool) Close() error {
	p.mu.Lock() // a prefork adds to p.wg under p.mu, if not cancelled
	p.cancel()
	p.mu.Unlock()
	p.wg.Wait()
	p.mu.Lock()
	var all []*warmJail
	var forks []*forking
	for _, k := range p.kinds {
		all = append(all, k.ready...)
		k.ready = nil
	}
	for key, f := range p.forks {
		forks = append(forks, f)
		delete(p.forks, key)
	}
	p.mu.Unlock()
	// Each jail's teardown mostly waits for the kernel: all at once.
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, w := range all {
		wg.Go(func() { errs[i] = w.discard() })
	}
	for _, f := range forks {
		wg.Go(func() { p.closeFork(f) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// describe is for logs: the interpreter of a kind.
func describe(s sandbox.Spec) string {
	if len(s.Argv) == 0 {
		return "?"
	}
	return strings.TrimSpace(s.Argv[0])
}
