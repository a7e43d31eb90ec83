package pyenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// JailRunner runs one payload in a jail; *sandbox.Manager implements it.
type JailRunner interface {
	Run(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc) (sandbox.Result, error)
}

// The lint profiles. The default one reports what is most likely a bug in
// a snippet and nothing about its style: pyflakes (F: undefined and unused
// names, imports, redefinitions), pycodestyle's statement and syntax
// errors (E7: comparisons to None or True with ==, `not x in y`, bare
// except, several statements on a line; E9: code that does not parse)
// and flake8-bugbear (B: mutable default arguments, loop variables caught
// late by closures, assert on a tuple...). Two E7 rules are about names,
// not bugs, and stay off: E731 (a lambda bound to a name) and E741 (a
// variable called l, O or I). The strict profile selects every rule ruff
// knows except those that conflict with each other or with the formatter
// (COM812, D203, D213), demand headers snippets never have (CPY, D100),
// flag ordinary boolean arguments (FBT) or async functions without await
// (RUF029).
const (
	ProfileDefault = "default"
	ProfileStrict  = "strict"
)

// Rule selections of the profiles (see ProfileDefault).
var (
	DefaultLintSelect = []string{"F", "E7", "E9", "B"}
	DefaultLintIgnore = []string{"E731", "E741"}
	StrictLintSelect  = []string{"ALL"}
	StrictLintIgnore  = []string{"COM812", "CPY", "D100", "D203", "D213", "FBT", "RUF029"}
)

// ErrBadProfile marks a lint profile that is neither default nor strict.
var ErrBadProfile = errors.New("unknown lint profile")

// builtinsSetting tells ruff the names pyexec's driver adds to the
// builtins of every run and cell (display), so that code calling them is
// not flagged as using an undefined name (F821). An inline setting,
// which --isolated still reads (a top-level one: ruff has no
// lint.builtins).
const builtinsSetting = `builtins = ["display"]`

// ruffInJail is where the jail sees ruff: a path of its own, so that ruff
// may live anywhere on the host, under /tmp as well (which the jail
// replaces with its own).
const ruffInJail = "/opt/pyexec/bin/ruff"

// Position is a place in a file, 1-based.
type Position struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

// Diagnostic is one problem ruff found.
type Diagnostic struct {
	Code        string          `json:"code"`
	Message     string          `json:"message"`
	Location    Position        `json:"location"`
	EndLocation Position        `json:"end_location"`
	Fix         json.RawMessage `json:"fix"` // ruff's fix object, or null
	Filename    string          `json:"filename"`
}

// LintConfig configures a Linter.
type LintConfig struct {
	// Ruff is the ruff binary; empty means "ruff" on $PATH.
	Ruff string
	// Select and Ignore are ruff rule selectors of the default profile.
	// Defaults: DefaultLintSelect and DefaultLintIgnore.
	Select, Ignore []string
	// Timeout bounds one run. Default 20s.
	Timeout time.Duration
	// Concurrency bounds the ruff jails running at once. Default 2.
	Concurrency int
}

// LintRules choose the rules of one run: Profile ("" is the default
// one, whose rules the operator configures) gives the selection, and
// Select and Ignore, when not nil, replace the profile's. An empty,
// non-nil Ignore ignores nothing.
type LintRules struct {
	Profile        string
	Select, Ignore []string
}

// Linter runs ruff on a project inside a jail, with no network.
type Linter struct {
	run     JailRunner
	ruff    string
	sel     []string
	ignore  []string
	timeout time.Duration
	sem     chan struct{}
}

// NewLinter finds ruff and returns a Linter that runs it through run.
func NewLinter(run JailRunner, cfg LintConfig) (*Linter, error) {
	ruff, err := FindTool("ruff", cfg.Ruff)
	if err != nil {
		return nil, err
	}
	l := &Linter{run: run, ruff: ruff, sel: cfg.Select, ignore: cfg.Ignore, timeout: cfg.Timeout}
	if l.sel == nil {
		l.sel = DefaultLintSelect
	}
	if l.ignore == nil {
		l.ignore = DefaultLintIgnore
	}
	if l.timeout <= 0 {
		l.timeout = 20 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 2
	}
	l.sem = make(chan struct{}, cfg.Concurrency)
	for _, r := range slices.Concat(l.sel, l.ignore) {
		if !ruleSelector.MatchString(r) {
			return nil, fmt.Errorf("%w: lint rule selector %q", ErrBadRule, r)
		}
	}
	return l, nil
}

// ErrBadRule marks a lint rule selector that is not one (a 400 when a
// request sent it).
var ErrBadRule = errors.New("invalid rule selector")

// ruleSelector is what ruff accepts as a rule selector: ALL, a linter
// prefix or a rule code ("E", "E4", "F401", "PLR0913").
var ruleSelector = regexp.MustCompile(`^(ALL|[A-Z]{1,5}[0-9]{0,4})$`)

// ValidLintRule reports whether s is a ruff rule selector: ALL, a linter
// prefix or a rule code.
func ValidLintRule(s string) bool { return ruleSelector.MatchString(s) }

// Ruff is the ruff binary the Linter runs.
func (l *Linter) Ruff() string { return l.ruff }

// Lint checks the project's Python files and returns the diagnostics,
// ordered by file and position, with file names relative to the project.
// The project's own ruff configuration is ignored (--isolated): the
// operator chooses the rules.
func (l *Linter) Lint(ctx context.Context, files []File, rules LintRules) ([]Diagnostic, error) {
	sel, ignore := l.sel, l.ignore
	switch rules.Profile {
	case "", ProfileDefault:
	case ProfileStrict:
		sel, ignore = StrictLintSelect, StrictLintIgnore
	default:
		return nil, fmt.Errorf("%w %q: use %q or %q", ErrBadProfile, rules.Profile, ProfileDefault, ProfileStrict)
	}
	if rules.Select != nil {
		sel = rules.Select
	}
	if rules.Ignore != nil {
		ignore = rules.Ignore
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("%w: no rule is selected", ErrBadRule)
	}
	for _, r := range slices.Concat(sel, ignore) {
		if !ruleSelector.MatchString(r) {
			return nil, fmt.Errorf("%w: %q is not ALL, a linter prefix or a rule code", ErrBadRule, r)
		}
	}
	var sf []sandbox.File
	for _, f := range files {
		if strings.HasSuffix(f.Path, ".py") || strings.HasSuffix(f.Path, ".pyi") {
			sf = append(sf, sandbox.File{Path: f.Path, Data: f.Data})
		}
	}
	if len(sf) == 0 {
		return []Diagnostic{}, nil
	}
	argv := []string{ruffInJail, "check", "--isolated", "--no-cache", "--exit-zero", "--quiet", "--output-format", "json",
		"--config", builtinsSetting, "--select", strings.Join(sel, ",")}
	if len(ignore) > 0 {
		argv = append(argv, "--ignore", strings.Join(ignore, ","))
	}
	argv = append(argv, ".")
	select {
	case l.sem <- struct{}{}:
		defer func() { <-l.sem }()
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting to run ruff: %w", ctx.Err())
	}
	res, err := l.run.Run(ctx, sandbox.Spec{
		Argv:   argv,
		Env:    []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + sandbox.WorkDir, "NO_COLOR=1"},
		Dir:    sandbox.WorkDir,
		Files:  sf,
		Mounts: []sandbox.Mount{{Source: l.ruff, Target: ruffInJail}},
		Limits: sandbox.Limits{WallTime: l.timeout, CPUTime: l.timeout, MemoryBytes: 512 << 20,
			StdoutBytes: 16 << 20, StderrBytes: 64 << 10},
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("running ruff: %w", err)
	}
	if res.Status != sandbox.StatusOK {
		return nil, fmt.Errorf("running ruff: it ended %s (%s): %s", res.Status, res.Reason, firstLine(string(res.Stderr)))
	}
	var wire []ruffDiagnostic
	if err := json.Unmarshal(res.Stdout, &wire); err != nil {
		return nil, fmt.Errorf("running ruff: unreadable output: %w", err)
	}
	out := make([]Diagnostic, len(wire))
	for i, w := range wire {
		out[i] = Diagnostic{Code: w.Code, Message: w.Message, Fix: w.Fix,
			Location:    Position{Line: w.Location.Row, Column: w.Location.Column},
			EndLocation: Position{Line: w.EndLocation.Row, Column: w.EndLocation.Column},
			Filename:    strings.TrimPrefix(path.Clean(w.Filename), sandbox.WorkDir+"/")}
		if len(out[i].Fix) == 0 {
			out[i].Fix = json.RawMessage("null")
		}
	}
	return out, nil
}

// ruffDiagnostic is one entry of ruff's JSON output.
type ruffDiagnostic struct {
	Code        string          `json:"code"`
	Message     string          `json:"message"`
	Location    ruffPosition    `json:"location"`
	EndLocation ruffPosition    `json:"end_location"`
	Fix         json.RawMessage `json:"fix"`
	Filename    string          `json:"filename"`
}

type ruffPosition struct {
	Row    int `json:"row"`
	Column int `json:"column"`
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
