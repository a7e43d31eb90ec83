package detect

import (
	"bufio"
	"container/list"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
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

// stdlibFallback lists the standard library of interpreters older than
// 3.10, which lack sys.stdlib_module_names.
//
//go:embed stdlib_fallback.txt
var stdlibFallback string

// JailRunner runs one payload in a jail; *sandbox.Manager implements it.
type JailRunner interface {
	Run(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc) (sandbox.Result, error)
}

// File is one file of a project, relative to the workspace.
type File struct {
	Path string
	Data []byte
}

// Import is one import statement of the project that names a module
// outside the standard library and outside the project.
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

// Analysis is what the detector found in a project.
type Analysis struct {
	// Imports are the third-party imports: what may need installing.
	Imports []Import
	// AllImports are every absolute import, the standard library's and
	// the project's included (what policy rules see).
	AllImports   []Import
	Calls        []Call
	SyntaxErrors []SyntaxIssue
}

// detectorOutput is the detector's JSON.
type detectorOutput struct {
	Stdlib  []string      `json:"stdlib"` // nil before Python 3.10
	Builtin []string      `json:"builtin"`
	Imports []Import      `json:"imports"`
	Calls   []Call        `json:"calls"`
	Errors  []SyntaxIssue `json:"errors"`
}

// AnalyzerConfig configures an Analyzer.
type AnalyzerConfig struct {
	// Concurrency bounds the detector jails running at once. Default 2.
	Concurrency int
	// CacheEntries bounds the analyses kept, keyed by interpreter and
	// project content. Default 512.
	CacheEntries int
	// Timeout bounds one detector run. Default 20s.
	Timeout time.Duration
}

// Analyzer parses projects with the target interpreter's own ast module,
// inside a jail with no network, and remembers recent answers.
type Analyzer struct {
	run     JailRunner
	cfg     AnalyzerConfig
	sem     chan struct{}
	mu      sync.Mutex
	lru     *list.List // of *cached, most recent first
	entries map[string]*list.Element
}

type cached struct {
	key string
	an  *Analysis
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
	return &Analyzer{run: run, cfg: cfg, sem: make(chan struct{}, cfg.Concurrency),
		lru: list.New(), entries: map[string]*list.Element{}}
}

// Analyze returns the third-party imports and the calls of the project
// whose entry point is entry, as seen by the interpreter in. Imports of
// the standard library and of the project's own modules and packages
// (relative to the workspace and to the entry point's directory, the two
// places Python looks first) are dropped. The Analysis may be shared with
// other callers: it must not be modified.
func (a *Analyzer) Analyze(ctx context.Context, in interp.Interpreter, files []File, entry string) (*Analysis, error) {
	key := analysisKey(in, files, entry)
	if an := a.lookup(key); an != nil {
		return an, nil
	}
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting to detect imports: %w", ctx.Err())
	}
	defer func() { <-a.sem }()
	out, err := a.detect(ctx, in, files)
	if err != nil {
		return nil, err
	}
	an := filterImports(out, projectModules(files, entry))
	a.store(key, an)
	return an, nil
}

func (a *Analyzer) detect(ctx context.Context, in interp.Interpreter, files []File) (*detectorOutput, error) {
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
	if err != nil {
		return nil, fmt.Errorf("detecting imports: %w", err)
	}
	if res.Status != sandbox.StatusOK {
		return nil, fmt.Errorf("detecting imports: the detector ended %s (%s): %s", res.Status, res.Reason, firstLine(string(res.Stderr)))
	}
	var out detectorOutput
	if err := json.Unmarshal(res.Stdout, &out); err != nil {
		return nil, fmt.Errorf("detecting imports: unreadable answer: %w", err)
	}
	if out.Stdlib == nil {
		out.Stdlib = fallbackStdlib()
	}
	return &out, nil
}

func fallbackStdlib() []string {
	var names []string
	sc := bufio.NewScanner(strings.NewReader(stdlibFallback))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			names = append(names, l)
		}
	}
	return names
}

// filterImports drops the standard library and the project's own modules.
func filterImports(out *detectorOutput, project map[string]bool) *Analysis {
	skip := map[string]bool{}
	for _, n := range out.Stdlib {
		skip[n] = true
	}
	for _, n := range out.Builtin {
		skip[n] = true
	}
	an := &Analysis{AllImports: out.Imports, Calls: out.Calls, SyntaxErrors: out.Errors}
	for _, im := range out.Imports {
		top, _, _ := strings.Cut(im.Module, ".")
		if skip[top] || project[top] || top == "" {
			continue
		}
		an.Imports = append(an.Imports, im)
	}
	return an
}

// projectModules returns the top-level module and package names that the
// project's files provide, relative to the workspace and to the directory
// of the entry point.
func projectModules(files []File, entry string) map[string]bool {
	roots := []string{"."}
	if d := path.Dir(path.Clean(entry)); d != "." {
		roots = append(roots, d)
	}
	names := map[string]bool{}
	for _, f := range files {
		p := path.Clean(f.Path)
		for _, r := range roots {
			rel := p
			if r != "." {
				var ok bool
				if rel, ok = strings.CutPrefix(p, r+"/"); !ok {
					continue
				}
			}
			first, _, isDir := strings.Cut(rel, "/")
			switch {
			case isDir:
				names[first] = true // a package, or a namespace package
			case strings.HasSuffix(first, ".py"), strings.HasSuffix(first, ".so"), strings.HasSuffix(first, ".pyc"):
				stem, _, _ := strings.Cut(first, ".")
				names[stem] = true
			}
		}
	}
	return names
}

func analysisKey(in interp.Interpreter, files []File, entry string) string {
	h := sha256.New()
	var n [8]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	put([]byte(in.Path))
	put([]byte(in.Full))
	put([]byte(entry))
	for _, f := range files {
		put([]byte(f.Path))
		put(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (a *Analyzer) lookup(key string) *Analysis {
	a.mu.Lock()
	defer a.mu.Unlock()
	if el, ok := a.entries[key]; ok {
		a.lru.MoveToFront(el)
		return el.Value.(*cached).an
	}
	return nil
}

func (a *Analyzer) store(key string, an *Analysis) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.entries[key]; ok {
		return
	}
	a.entries[key] = a.lru.PushFront(&cached{key: key, an: an})
	for a.lru.Len() > a.cfg.CacheEntries {
		last := a.lru.Back()
		a.lru.Remove(last)
		delete(a.entries, last.Value.(*cached).key)
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
