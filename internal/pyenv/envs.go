package pyenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrInstall marks an environment that could not be built; the
// *InstallError carries the resolver's message. Executions that need it
// end failed with reason install_error and their code never runs.
var ErrInstall = errors.New("installing requirements failed")

// InstallError is a failed build, with what the installer said.
type InstallError struct {
	Requirements []string
	Output       string // the installer's output (its tail when long)
	Err          error
}

func (e *InstallError) Error() string {
	msg := fmt.Sprintf("installing %s failed: %v", strings.Join(e.Requirements, ", "), e.Err)
	if e.Output != "" {
		msg += "\n" + e.Output
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrInstall) hold.
func (e *InstallError) Unwrap() []error { return []error{ErrInstall, e.Err} }

// metaFile is the record each environment keeps about itself; its mtime
// is the environment's last use.
const metaFile = "pyexec-env.json"

// Env describes one built environment.
type Env struct {
	Key string `json:"key"`
	// Dir is the environment (a virtualenv); jails mount it read-only at
	// the same path and run Dir/bin/python.
	Dir           string    `json:"dir"`
	Python        string    `json:"python"`                  // full version of its interpreter
	PythonPath    string    `json:"python_path"`             // the base interpreter
	Requirements  []string  `json:"requirements"`            // a layer's: what it adds to its base
	Installed     []string  `json:"installed"`               // normalised names of every distribution in it
	NotInstalled  []string  `json:"not_installed,omitempty"` // optional requirements that could not be installed
	Installer     string    `json:"installer"`               // "uv" or "pip"
	SizeBytes     int64     `json:"size_bytes"`
	Created       time.Time `json:"created"`
	LastUsed      time.Time `json:"-"`
	BuildDuration string    `json:"build_duration"`
	Base          bool      `json:"-"` // the base environment of its interpreter
	// BaseKey is set on a layer: an environment that holds only what its
	// requirements add to the base environment BaseKey, whose
	// site-packages it reaches through a .pth file. Installed lists both.
	BaseKey string `json:"base_key,omitempty"`
	// BaseDir is the base environment's directory (a layer's only).
	BaseDir string `json:"-"`
}

// EnvStats count what the environments did since New.
type EnvStats struct {
	Builds    int64 // environments built (installer runs)
	Hits      int64 // acquisitions served by an existing environment
	Evictions int64
}

// Environments builds content-addressed dependency environments once and
// hands them out; create it with NewEnvironments and Close it when done.
type Environments struct {
	cfg EnvConfig
	// uv is the uv binary, "" for the pip fallback. With cfg.AwaitUV it is
	// known only once resolveUV has run (uvKnown); it never changes after.
	uv        string
	uvKnown   bool
	uvMu      sync.Mutex // guards uv and uvKnown
	uvResolve sync.Mutex // one resolveUV waits at a time
	log       *slog.Logger
	base      Set
	builds    atomic.Int64
	hits      atomic.Int64
	evicts    atomic.Int64

	ctx    context.Context // cancelled by Close: stops builds
	cancel context.CancelFunc
	wg     sync.WaitGroup // builds in progress

	baseEnv envMemo // the base environment's env.json, decoded

	mu      sync.Mutex
	flights map[string]*flight
	missing map[string]time.Time // detected imports no index had, by when
	evictMu sync.Mutex
}

// flight is one build in progress that any number of requests wait for.
type flight struct {
	mu   sync.Mutex
	subs []func(string)
	done chan struct{}
	err  error
}

func (f *flight) subscribe(p func(string)) {
	if p == nil {
		return
	}
	f.mu.Lock()
	f.subs = append(f.subs, p)
	f.mu.Unlock()
}

func (f *flight) progress(line string) {
	f.mu.Lock()
	subs := slices.Clone(f.subs)
	f.mu.Unlock()
	for _, s := range subs {
		s(line)
	}
}

// NewEnvironments validates cfg, creates its directories and finds uv.
func NewEnvironments(cfg EnvConfig) (*Environments, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var baseReqs []Requirement
	for _, b := range cfg.Base {
		r, err := ParseRequirement(b, FromProject)
		if err != nil {
			return nil, fmt.Errorf("base environment: %w", err)
		}
		baseReqs = append(baseReqs, r)
	}
	for _, d := range []string{cfg.Dir, envsDir(cfg), tmpDir(cfg)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		// The payload user must be able to reach the environments.
		if err := os.Chmod(d, 0o755); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{lockDir(cfg), filepath.Join(cfg.Dir, "cache")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := checkTraversable(cfg.Dir); err != nil {
		return nil, err
	}
	uv := ""
	if !cfg.NoUV && cfg.UV == "" && cfg.AwaitUV != nil {
		ctx, cancel := context.WithCancel(context.Background())
		return &Environments{cfg: cfg, log: cfg.Logger, base: Merge(baseReqs),
			ctx: ctx, cancel: cancel, flights: map[string]*flight{}, missing: map[string]time.Time{}}, nil
	}
	if !cfg.NoUV {
		var err error
		if uv, err = FindTool("uv", cfg.UV); err != nil {
			if cfg.UV != "" {
				return nil, err // configured explicitly: must work
			}
			cfg.Logger.Info("uv not found; environments are built with venv and pip", "reason", err)
			uv = ""
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Environments{cfg: cfg, uv: uv, uvKnown: true, log: cfg.Logger, base: Merge(baseReqs),
		ctx: ctx, cancel: cancel, flights: map[string]*flight{}, missing: map[string]time.Time{}}, nil
}

// Close stops builds in progress and waits for them.
func (m *Environments) Close() {
	m.cancel()
	m.wg.Wait()
}

// Installer names the tool that builds environments: "uv" or "pip", or
// "uv (pending)" while the first build has still to wait for uv.
func (m *Environments) Installer() string {
	m.uvMu.Lock()
	defer m.uvMu.Unlock()
	switch {
	case !m.uvKnown:
		return "uv (pending)"
	case m.uv != "":
		return "uv"
	}
	return "pip"
}

// resolveUV settles which installer builds use, waiting for cfg.AwaitUV
// the first time; afterwards m.uv is read without the lock.
func (m *Environments) resolveUV(ctx context.Context) error {
	m.uvResolve.Lock()
	defer m.uvResolve.Unlock()
	m.uvMu.Lock()
	known := m.uvKnown
	m.uvMu.Unlock()
	if known {
		return nil
	}
	uv, err := m.cfg.AwaitUV(ctx)
	if ctx.Err() != nil {
		return fmt.Errorf("waiting for uv: %w", ctx.Err())
	}
	if err != nil {
		m.log.Warn("uv is not available: environments are built with venv and pip, which is slower", "reason", err)
		uv = ""
	} else {
		m.log.Info("environments are built with uv", "uv", uv)
	}
	m.uvMu.Lock()
	m.uv, m.uvKnown = uv, true
	m.uvMu.Unlock()
	return nil
}

// Dir is the directory holding the environments.
func (m *Environments) Dir() string { return m.cfg.Dir }

// Stats returns the counters.
func (m *Environments) Stats() EnvStats {
	return EnvStats{Builds: m.builds.Load(), Hits: m.hits.Load(), Evictions: m.evicts.Load()}
}

func envsDir(c EnvConfig) string { return filepath.Join(c.Dir, "envs") }
func tmpDir(c EnvConfig) string  { return filepath.Join(c.Dir, "tmp") }
func lockDir(c EnvConfig) string { return filepath.Join(c.Dir, "locks") }

// Key returns the content address of the environment of set under in:
// a hash of the interpreter, the index configuration and the normalised,
// sorted requirements.
func (m *Environments) Key(in Interpreter, set Set) string {
	h := sha256.New()
	fmt.Fprintf(h, "pyexec-env-v1\n%s\n%s\n%s\n%s\n%s\n", in.Path, in.Full, m.cfg.IndexURL,
		strings.Join(m.cfg.ExtraIndexURLs, " "), set.canonical())
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Lease is an environment in use: it cannot be evicted until Release. A
// layer's lease holds its base environment too.
type Lease struct {
	Env Env
	// Skipped are imports found in the code that no package index has:
	// left out, so that the program's own ModuleNotFoundError shows.
	Skipped []string
	bare    string // the interpreter, when nothing is left to install
	lock    *fileLock
	base    *fileLock
	once    sync.Once
}

// Python is the interpreter to run inside the jail: the environment's
// bin/python, which finds the environment through its pyvenv.cfg.
func (l *Lease) Python() string {
	if l.Env.Dir == "" {
		return l.bare
	}
	return filepath.Join(l.Env.Dir, "bin", "python")
}

// Dirs are the directories a jail mounts read-only for the environment:
// its own and, for a layer, its base environment's.
func (l *Lease) Dirs() []string {
	switch {
	case l.Env.Dir == "":
		return nil
	case l.Env.BaseDir != "":
		return []string{l.Env.Dir, l.Env.BaseDir}
	}
	return []string{l.Env.Dir}
}

// Release ends the use; it is safe to call more than once.
func (l *Lease) Release() {
	l.once.Do(func() {
		for _, lk := range []*fileLock{l.lock, l.base} {
			if lk != nil {
				lk.unlock()
			}
		}
	})
}

// OperatorChosen reports whether dir, a directory a jail mounts, holds
// only what the operator chose: anything outside the environment store
// (an interpreter's installation, say) or a base environment — not an
// environment built for a request's requirements or detected imports.
func (m *Environments) OperatorChosen(dir string) bool {
	store, err1 := filepath.Abs(envsDir(m.cfg))
	d, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	if d != store && !strings.HasPrefix(d, store+string(filepath.Separator)) {
		return true
	}
	if len(m.base) == 0 || filepath.Dir(d) != store {
		return false
	}
	env, err := m.readEnv(filepath.Base(d))
	return err == nil && env.Key == m.Key(Interpreter{Path: env.PythonPath, Full: env.Python}, m.base)
}

// BaseSet returns the base environment's requirements.
func (m *Environments) BaseSet() Set { return slices.Clone(m.base) }

// Acquire returns the environment of set under in, building it first if
// it does not exist yet: once, however many requests ask for it at the
// same time, in this process or another sharing Dir. progress receives
// the installer's output lines while the caller waits (it may be nil).
// When the base environment of in exists and has every distribution that
// set names without constraints, it is used instead; when it exists but
// lacks some, the environment is a layer over it holding only what set
// adds (see acquireLayer). A failed build is a *InstallError and is not
// remembered: the next request tries again. Imports that were only
// detected and that no index has are left out (Lease.Skipped) rather
// than failing the build. An empty set is served by the base environment
// once it is built — the default environment of every execution — and
// until then by the bare interpreter (a lease without directories).
func (m *Environments) Acquire(ctx context.Context, in Interpreter, set Set, progress func(string)) (*Lease, error) {
	if progress == nil {
		progress = func(string) {}
	}
	set, skipped := m.withoutKnownMissing(set)
	for _, n := range skipped {
		progress(skipNote(n))
	}
	l, err := m.acquire(ctx, in, set, progress)
	if errors.Is(err, ErrInstall) {
		if missing := m.missingDetected(ctx, set); len(missing) > 0 {
			for _, n := range missing {
				progress(skipNote(n))
			}
			skipped = append(skipped, missing...)
			l, err = m.acquire(ctx, in, set.without(missing), progress)
		}
	}
	if err != nil {
		return nil, err
	}
	l.Skipped = skipped
	return l, nil
}

// acquire is Acquire without the handling of missing imports.
func (m *Environments) acquire(ctx context.Context, in Interpreter, set Set, progress func(string)) (*Lease, error) {
	if len(set) == 0 { // nothing asked for, or everything skipped
		if l, ok := m.acquireBase(ctx, in, nil); ok {
			return l, nil
		}
		return &Lease{bare: in.Path}, nil
	}
	if err := m.awaitBase(ctx, in, set, progress); err != nil {
		return nil, err
	}
	if l, ok := m.acquireBase(ctx, in, set); ok {
		return l, nil
	}
	if l, err := m.acquireLayer(ctx, in, set, progress); !errors.Is(err, errNotLayered) {
		return l, err
	}
	key := m.Key(in, set)
	use, err := lockWait(ctx, filepath.Join(lockDir(m.cfg), key+".use"), false)
	if err != nil {
		return nil, err
	}
	l, err := m.leaseBuilt(ctx, key, use, nil, func() *flight {
		return m.startBuild(key, func(ctx context.Context, progress func(string)) error {
			return m.build(ctx, in, set, key, progress)
		})
	}, progress)
	if err != nil {
		use.unlock()
	}
	return l, err
}

// awaitBase waits for the base environment of in when this process is
// building it and set shares a distribution with it: the base or a small
// layer over it then serves set, rather than a second large build.
func (m *Environments) awaitBase(ctx context.Context, in Interpreter, set Set, progress func(string)) error {
	if len(m.base) == 0 || !slices.ContainsFunc(set, func(r Requirement) bool {
		return slices.ContainsFunc(m.base, func(b Requirement) bool { return b.Name == r.Name })
	}) {
		return nil
	}
	m.mu.Lock()
	f := m.flights[m.Key(in, m.base)]
	m.mu.Unlock()
	if f == nil {
		return nil
	}
	progress("waiting for the base environment, which is being built")
	f.subscribe(progress)
	select {
	case <-f.done:
		return nil // a failed base build: set is built on its own
	case <-ctx.Done():
		return fmt.Errorf("waiting for the base environment: %w", ctx.Err())
	}
}

// leaseBuilt returns the lease of key, starting its build when it does
// not exist yet and waiting for it. use (and base, for a layer) are the
// use locks the lease takes over; the caller releases them on error.
func (m *Environments) leaseBuilt(ctx context.Context, key string, use, base *fileLock, start func() *flight, progress func(string)) (*Lease, error) {
	for built := false; ; built = true {
		if env, err := m.readEnv(key); err == nil {
			if !built {
				m.hits.Add(1)
			}
			m.touch(key)
			if env.BaseKey != "" {
				m.touch(env.BaseKey)
			}
			return &Lease{Env: env, lock: use, base: base}, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		f := start()
		f.subscribe(progress)
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the environment: %w", ctx.Err())
		}
		if f.err != nil {
			return nil, f.err
		}
		m.evictOver(m.cfg.MaxBytes)
	}
}

// acquireBase leases the base environment if it exists and covers set.
func (m *Environments) acquireBase(ctx context.Context, in Interpreter, set Set) (*Lease, bool) {
	if len(m.base) == 0 {
		return nil, false
	}
	key := m.Key(in, m.base)
	env, err := m.baseEnv.read(m, key)
	if err != nil {
		return nil, false
	}
	for _, r := range set {
		if r.Spec != r.Name || !slices.Contains(env.Installed, r.Name) {
			return nil, false
		}
	}
	use, err := lockWait(ctx, filepath.Join(lockDir(m.cfg), key+".use"), false)
	if err != nil {
		return nil, false
	}
	if _, err := os.Stat(env.Dir); err != nil { // pruned meanwhile
		use.unlock()
		return nil, false
	}
	m.hits.Add(1)
	if time.Since(env.LastUsed) >= baseTouchEvery {
		m.touch(key)
	}
	return &Lease{Env: env, lock: use}, true
}

// baseTouchEvery is how often a use of the base environment is recorded
// for the LRU order (env.json's modification time). It is leased for
// nearly every execution: recording each use cost a write to the file's
// inode per request, and the order between environments needs no finer
// time than this.
const baseTouchEvery = time.Minute

// PrepareBase builds the base environment of in unless it exists.
func (m *Environments) PrepareBase(ctx context.Context, in Interpreter, progress func(string)) (Env, error) {
	if len(m.base) == 0 {
		return Env{}, errors.New("no base environment is configured")
	}
	key := m.Key(in, m.base)
	use, err := lockWait(ctx, filepath.Join(lockDir(m.cfg), key+".use"), false)
	if err != nil {
		return Env{}, err
	}
	defer use.unlock()
	if env, err := m.readEnv(key); err == nil {
		return env, nil
	}
	f := m.startBuild(key, func(ctx context.Context, progress func(string)) error {
		return m.build(ctx, in, m.base, key, progress)
	})
	f.subscribe(progress)
	select {
	case <-f.done:
	case <-ctx.Done():
		return Env{}, ctx.Err()
	}
	if f.err != nil {
		return Env{}, f.err
	}
	return m.readEnv(key)
}

// startBuild returns the flight building key, starting one if none is in
// progress in this process. The build belongs to m, not to the request
// that started it: a cancelled request does not fail the others waiting.
func (m *Environments) startBuild(key string, build func(ctx context.Context, progress func(string)) error) *flight {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.flights[key]; ok {
		return f
	}
	f := &flight{done: make(chan struct{})}
	m.flights[key] = f
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f.err = m.buildLocked(key, build, f.progress)
		m.mu.Lock()
		delete(m.flights, key)
		m.mu.Unlock()
		close(f.done)
	}()
	return f
}

// buildLocked builds key under the cross-process build lock, unless
// another process built it while this one waited for the lock.
func (m *Environments) buildLocked(key string, build func(ctx context.Context, progress func(string)) error, progress func(string)) error {
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.InstallTimeout)
	defer cancel()
	lk, err := lockWait(ctx, filepath.Join(lockDir(m.cfg), key+".build"), true)
	if err != nil {
		return err
	}
	defer lk.unlock()
	if _, err := m.readEnv(key); err == nil {
		return nil
	}
	return build(ctx, progress)
}

// readEnv loads the record of a built environment.
func (m *Environments) readEnv(key string) (Env, error) {
	dir := filepath.Join(envsDir(m.cfg), key)
	p := filepath.Join(dir, metaFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return Env{}, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return Env{}, err
	}
	var env Env
	if err := json.Unmarshal(b, &env); err != nil {
		return Env{}, fmt.Errorf("environment %s: %w", key, err)
	}
	env.Key, env.Dir, env.LastUsed = key, dir, st.ModTime()
	if env.BaseKey != "" {
		env.BaseDir = filepath.Join(envsDir(m.cfg), env.BaseKey)
	}
	return env, nil
}

// touch records a use of key for the LRU order.
func (m *Environments) touch(key string) {
	now := time.Now()
	if err := os.Chtimes(filepath.Join(envsDir(m.cfg), key, metaFile), now, now); err != nil {
		m.log.Warn("recording an environment's use", "key", key, "err", err)
	}
}
