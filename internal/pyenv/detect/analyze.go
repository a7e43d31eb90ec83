package detect

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv/interp"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// detectSource is the import detector; it travels on argv (python -c) so
// the project's files cannot replace it.
//
//go:embed detect.py
var detectSource string

// JailRunner runs one payload in a jail; *sandbox.Manager implements it.
type JailRunner interface {
	Run(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc) (sandbox.Result, error)
}

// File is one file of a project, relative to the workspace.
type File struct {
	Path string
	Data []byte
}

// Import is one import of the project: an import statement's module, or
// the string constant given to __import__ or importlib.import_module.
type Import struct {
	Module   string `json:"module"` // dotted, as written: "google.protobuf.json_format"
	File     string `json:"file"`
	Line     int    `json:"line"`
	Optional bool   `json:"optional"` // inside try/except ImportError
}

// Call is one call in the project, its callee resolved through the file's
// imports: `import subprocess as sp; sp.run()` is "subprocess.run".
type Call struct {
	Name string `json:"name"`
	File string `json:"file"`
	Line int    `json:"line"`
}

// SyntaxIssue is a file the interpreter could not parse; the run itself
// will report it properly.
type SyntaxIssue struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Message string `json:"message"`
}

// Analysis is what detection found in a project. Imports and calls are in
// the order of the detector's walk of the files, then by line and name.
type Analysis struct {
	// Imports are the third-party imports: what may need installing.
	Imports []Import
	// AllImports are every absolute import, the standard library's and
	// the project's included (what policy rules see).
	AllImports []Import
	// Calls are the calls whose callee is a dotted name; nil unless asked
	// for (Analyze's calls).
	Calls []Call
	// SyntaxErrors are the files the interpreter could not parse, when the
	// interpreter's ast read the project.
	SyntaxErrors []SyntaxIssue
}

// detectorOutput is the detector's JSON.
type detectorOutput struct {
	Stdlib  []string      `json:"stdlib"` // nil before Python 3.10
	Builtin []string      `json:"builtin"`
	Imports []Import      `json:"imports"`
	Calls   []Call        `json:"calls"`
	Errors  []SyntaxIssue `json:"errors"`
	Deep    []string      `json:"deep"` // files nested too deeply for ast to walk
}

// AnalyzerConfig configures an Analyzer.
type AnalyzerConfig struct {
	// Concurrency bounds the detector jails running at once. Default 2.
	Concurrency int
	// CacheEntries bounds the detector's answers kept, keyed by
	// interpreter and project content. Default 512.
	CacheEntries int
	// Timeout bounds one detector run. Default 20s.
	Timeout time.Duration
	// Logger receives a debug line for each project the scan leaves to the
	// detector. Default: none.
	Logger *slog.Logger
}

// Analyzer finds the imports and calls of projects. The scan (scan.go)
// reads ordinary code in the server, in microseconds; the detector — the
// target interpreter's own ast module, in a jail with no network — reads
// what the scan cannot decide, and once per interpreter tells its
// standard library. The two agree on everything the scan decides.
type Analyzer struct {
	run   JailRunner
	cfg   AnalyzerConfig
	sem   chan struct{}
	cache *cache

	mu      sync.Mutex
	stdlibs map[string]*stdlibFlight // by interpreter
}

// NewAnalyzer returns an Analyzer that runs its detector through run.
func NewAnalyzer(run JailRunner, cfg AnalyzerConfig) *Analyzer {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 2
	}
	if cfg.CacheEntries <= 0 {
		cfg.CacheEntries = 512
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 20 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Analyzer{run: run, cfg: cfg, sem: make(chan struct{}, cfg.Concurrency),
		cache: newCache(cfg.CacheEntries), stdlibs: map[string]*stdlibFlight{}}
}

// Analyze returns the imports of the project whose entry point is entry,
// as the interpreter in would see them, and its calls if calls is set.
// Imports of the standard library and of the project's own modules and
// packages (relative to the workspace and to the entry point's directory,
// the two places Python looks first) are not among the third-party ones.
// Code beyond what detection reads is an error wrapping ErrTooComplex. The
// Analysis may be shared with other callers: it must not be modified.
func (a *Analyzer) Analyze(ctx context.Context, in interp.Interpreter, files []File, entry string, calls bool) (*Analysis, error) {
	why := "an interpreter version the scan does not know"
	if minor, ok := python3Minor(in.Full); ok {
		f, unsure, err := scanProject(files, minor)
		if err != nil {
			return nil, err
		}
		why = unsure
		if why == "" && calls && f.callsUnsure != "" {
			why = "calls: " + f.callsUnsure
		}
		if why == "" {
			var skip map[string]bool
			if len(f.imports) > 0 { // code that imports nothing never waits for the standard library's names
				if skip, err = a.standard(ctx, in); err != nil {
					return nil, err
				}
			}
			an := &Analysis{AllImports: f.imports, Imports: thirdParty(f.imports, skip, projectModules(files, entry))}
			if calls {
				an.Calls = f.calls
			}
			return an, nil
		}
	}
	a.cfg.Logger.Debug("import detection: the interpreter's ast reads this project", "why", why, "python", in.Full)
	return a.analyze(ctx, in, files, entry)
}

// python3Minor returns the minor version of a full CPython 3 version
// ("3.12.1" is 12).
func python3Minor(full string) (int, bool) {
	major, rest, ok1 := strings.Cut(full, ".")
	minor, _, _ := strings.Cut(rest, ".")
	var ma, mi int
	if _, err := fmt.Sscanf(major+" "+minor, "%d %d", &ma, &mi); !ok1 || err != nil || ma != 3 {
		return 0, false
	}
	return mi, true
}

// Remember keeps an, which Analyze returned for the same interpreter,
// files and entry (on this node or another, before a restart): when the
// scan leaves that project to the detector again, its answer is an
// instead of a jail. Nil is ignored.
func (a *Analyzer) Remember(in interp.Interpreter, files []File, entry string, an *Analysis) {
	if an != nil {
		a.cache.store(analysisKey(in, files, entry), an)
	}
}

// analyze runs the detector on the project, or returns its cached answer.
func (a *Analyzer) analyze(ctx context.Context, in interp.Interpreter, files []File, entry string) (*Analysis, error) {
	key := analysisKey(in, files, entry)
	if an := a.cache.lookup(key); an != nil {
		return an, nil
	}
	out, err := a.detect(ctx, in, files)
	if err != nil {
		return nil, err
	}
	if len(out.Deep) > 0 {
		return nil, fmt.Errorf("%w: %s is nested too deeply for the interpreter's ast to walk", ErrTooComplex, out.Deep[0])
	}
	skip := standardSet(out)
	a.knowStandard(in, skip)
	sortFound(out.Imports, out.Calls, walkRanks(files))
	an := &Analysis{AllImports: out.Imports, Imports: thirdParty(out.Imports, skip, projectModules(files, entry)),
		Calls: out.Calls, SyntaxErrors: out.Errors}
	a.cache.store(key, an)
	return an, nil
}

// detect runs the detector in a jail, one of at most Concurrency.
func (a *Analyzer) detect(ctx context.Context, in interp.Interpreter, files []File) (*detectorOutput, error) {
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting to detect imports: %w", ctx.Err())
	}
	defer func() { <-a.sem }()
	var sf []sandbox.File
	for _, f := range files {
		if strings.HasSuffix(f.Path, ".py") {
			sf = append(sf, sandbox.File{Path: f.Path, Data: f.Data})
		}
	}
	mounts := make([]sandbox.Mount, len(in.Mounts))
	for i, m := range in.Mounts {
		mounts[i] = sandbox.Mount{Source: m}
	}
	res, err := a.run.Run(ctx, sandbox.Spec{
		Argv:   []string{in.Path, "-I", "-S", "-B", "-c", detectSource},
		Env:    []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"},
		Dir:    sandbox.WorkDir,
		Files:  sf,
		Mounts: mounts,
		Limits: sandbox.Limits{WallTime: a.cfg.Timeout, CPUTime: a.cfg.Timeout, MemoryBytes: 512 << 20,
			StdoutBytes: 16 << 20, StderrBytes: 64 << 10},
	}, nil)
	switch {
	case err != nil:
		return nil, fmt.Errorf("detecting imports: %w", err)
	case res.Status == sandbox.StatusOutputLimit || res.Status == sandbox.StatusOOM || res.Status == sandbox.StatusTimeout:
		return nil, fmt.Errorf("%w: the interpreter's ast could not read it within its limits (%s: %s)", ErrTooComplex, res.Status, res.Reason)
	case res.Status != sandbox.StatusOK:
		return nil, fmt.Errorf("detecting imports: the detector ended %s (%s): %s", res.Status, res.Reason, firstLine(string(res.Stderr)))
	}
	var out detectorOutput
	if err := json.Unmarshal(res.Stdout, &out); err != nil {
		return nil, fmt.Errorf("detecting imports: unreadable answer: %w", err)
	}
	return &out, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
