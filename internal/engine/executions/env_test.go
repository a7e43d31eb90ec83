package executions

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
	"github.com/pyexec/pyexec/internal/store"
)

// envEngine is an engine on the real jail with environments served from a
// loopback index and the ruff linter.
func envEngine(t *testing.T) (*Service, *pyenv.Environments) {
	t.Helper()
	jails := runtest.Jails(t)
	uv, ruff := pyenvtest.Tools(t)
	ix := pyenvtest.NewIndex(t,
		pyenvtest.Wheel{Name: "PyYAML", Version: "6.0.99", Files: map[string]string{"yaml/__init__.py": "def safe_load(s):\n    return {'yaml': s}\n"}},
		pyenvtest.Wheel{Name: "rich-ish", Version: "2.0", Files: map[string]string{"richish.py": "def shout(s):\n    return s.upper()\n"}},
	)
	ctx := context.Background()
	pythons, err := pyenv.Discover(ctx, pyenv.OptionsFromEnv(os.Getenv))
	if err != nil {
		t.Skipf("no interpreters: %v", err)
	}
	envs, err := pyenv.NewEnvironments(pyenv.EnvConfig{Dir: pyenvtest.EnvDir(t), IndexURL: ix.URL, UV: uv, Base: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(envs.Close)
	imports, err := pyenv.ParseImportMap("richish rich-ish\n")
	if err != nil {
		t.Fatal(err)
	}
	res, err := pyenv.NewResolver(pyenv.NewAnalyzer(jails, pyenv.AnalyzerConfig{}), pyenv.ResolverConfig{
		Imports: pyenv.DefaultImportMap().With(imports),
		Policy:  pyenv.Policy{Rules: []pyenv.Rule{{Name: "no-shell", Action: pyenv.Deny, Calls: []string{"os.system"}}, {Name: "eval", Action: pyenv.Warn, Calls: []string{"eval"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	linter, err := pyenv.NewLinter(jails, pyenv.LintConfig{Ruff: ruff})
	if err != nil {
		t.Fatal(err)
	}
	emb, err := store.StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, emb.Conn(), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emb.Close() }) // after the node's
	n := newNode(t, nodeConfig{}, Deps{Store: st, Runner: jails, Interpreters: run.PyenvInterpreters{Set: pythons},
		Driver: run.RunnerDriver{}, Envs: run.PyenvEnvironments{Resolver: res, Envs: envs}, Linter: run.PyenvLinter{L: linter}})
	return n.x, envs
}

func files(kv ...string) []run.File {
	var out []run.File
	for i := 0; i < len(kv); i += 2 {
		out = append(out, run.File{Path: kv[i], Data: []byte(kv[i+1])})
	}
	return out
}

func TestEnvironmentsEndToEnd(t *testing.T) {
	eng, envs := envEngine(t)
	ctx := context.Background()
	cases := []struct {
		name       string
		req        run.Request
		status     run.Status
		reason     string
		stdout     string
		errText    string
		builds     int64 // environments built so far, after this case
		installEvt bool  // install events were published
		invalid    string
	}{
		{name: "import yaml installs pyyaml", req: run.Request{Files: files("main.py", "import yaml\nprint(yaml.safe_load('x'))\n")},
			status: run.StatusCompleted, stdout: "{'yaml': 'x'}\n", builds: 1, installEvt: true},
		{name: "same set again reuses the environment", req: run.Request{Files: files("main.py", "import yaml  # again\nprint('ok')\n")},
			status: run.StatusCompleted, stdout: "ok\n", builds: 1},
		{name: "project module installs nothing", req: run.Request{Files: files("main.py", "from helper import x\nprint(x)\n", "helper.py", "x = 'mine'\n")},
			status: run.StatusCompleted, stdout: "mine\n", builds: 1},
		{name: "guarded import never fails", req: run.Request{Files: files("main.py", "try:\n    import ujson\nexcept ImportError:\n    ujson = None\nprint(ujson)\n")},
			status: run.StatusCompleted, stdout: "None\n", builds: 2, installEvt: true},
		{name: "PEP 723 dependencies", req: run.Request{Files: files("main.py", "# /// script\n# dependencies = [\"rich-ish>=2\"]\n# ///\nimport importlib\nprint(importlib.import_module('richish').shout('hi'))\n")},
			status: run.StatusCompleted, stdout: "HI\n", builds: 3, installEvt: true},
		{name: "dash disables detection", req: run.Request{Requirements: "-", Files: files("main.py", "try:\n    import yaml\nexcept ImportError:\n    print('not installed')\n")},
			status: run.StatusCompleted, stdout: "not installed\n", builds: 3},
		{name: "install failure does not run the code", req: run.Request{Requirements: "no-such-dist\n", Files: files("main.py", "print('ran')\n")},
			status: run.StatusFailed, reason: run.ReasonInstallError, errText: "no-such-dist", builds: 3, installEvt: true},
		{name: "pre_commands run first, with stdio only", req: run.Request{PreCommands: []string{"echo pre > /work/marker; [ -e /proc/$$/fd/3 ] || echo no-fd-3 >> /work/marker"},
			Files: files("main.py", "print(open('marker').read().split())\n")},
			status: run.StatusCompleted, stdout: "['pre', 'no-fd-3']\n", builds: 3},
		{name: "failing pre_command ends the run", req: run.Request{PreCommands: []string{"echo out; exit 3", "echo never"}, Files: files("main.py", "print('ran')\n")},
			status: run.StatusCompleted, reason: run.ReasonPreCommand, stdout: "out\n", builds: 3},
		{name: "lint only does not run", req: run.Request{Lint: run.LintOnly, Files: files("main.py", "import os\nopen('/work/x','w').write('ran')\nprint('ran')\n")},
			status: run.StatusCompleted, builds: 3},
		{name: "policy deny is a 400 naming the rule", req: run.Request{Files: files("main.py", "import os\nos.system('id')\n")},
			invalid: `policy rule "no-shell"`},
		{name: "bad requirement is a 400", req: run.Request{Requirements: "--index-url http://evil/\n", Files: files("main.py", "pass\n")},
			invalid: "is not supported"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Entrypoint, tc.req.Caller = "main.py", tester
			x, err := eng.RunSync(ctx, tc.req)
			if tc.invalid != "" {
				if !errors.Is(err, run.ErrInvalid) || !strings.Contains(err.Error(), tc.invalid) {
					t.Fatalf("error %v, want ErrInvalid with %q", err, tc.invalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if x.Status != tc.status || x.Reason != tc.reason || x.Stdout != tc.stdout || !strings.Contains(x.Error, tc.errText) {
				t.Errorf("status=%s reason=%q stdout=%q error=%q stderr=%q", x.Status, x.Reason, x.Stdout, x.Error, x.Stderr)
			}
			if got := envs.Stats().Builds; got != tc.builds {
				t.Errorf("%d environments built so far, want %d", got, tc.builds)
			}
			if got := hasInstallEvent(t, eng, x.ID); got != tc.installEvt {
				t.Errorf("install events: %v, want %v", got, tc.installEvt)
			}
			if tc.req.Lint == run.LintOnly && (len(x.Lint) == 0 || x.Lint[0].Code == "") {
				t.Errorf("lint only returned no diagnostics: %+v", x.Lint)
			}
		})
	}
	t.Run("a detected import no index has is skipped: the program's own ModuleNotFoundError shows", func(t *testing.T) {
		x, err := eng.RunSync(ctx, run.Request{Entrypoint: "main.py", Caller: tester,
			Files: files("main.py", "import yaml\nprint('before')\nimport nosuchmodq\n")})
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != run.StatusCompleted || x.ExitCode != 1 || x.ErrorType != "ModuleNotFoundError" || x.Stdout != "before\n" {
			t.Errorf("status=%s exit=%d error_type=%q stdout=%q reason=%q error=%q", x.Status, x.ExitCode, x.ErrorType, x.Stdout, x.Reason, x.Error)
		}
		if len(x.Warnings) != 1 || !strings.Contains(x.Warnings[0], "nosuchmodq is not installed: no package index has it") {
			t.Errorf("warnings %q", x.Warnings)
		}
	})
	t.Run("an explicit requirement that does not exist fails without a hint about source builds", func(t *testing.T) {
		x, err := eng.RunSync(ctx, run.Request{Entrypoint: "main.py", Caller: tester, Requirements: "nosuchmodq\n", Files: files("main.py", "pass\n")})
		if err != nil {
			t.Fatal(err)
		}
		if x.Reason != run.ReasonInstallError || !strings.Contains(x.Error, "nosuchmodq") || strings.Contains(x.Error, "source builds") {
			t.Errorf("reason=%q error=%q", x.Reason, x.Error)
		}
	})
	t.Run("policy warning and lint alongside", func(t *testing.T) {
		x, err := eng.RunSync(ctx, run.Request{Entrypoint: "main.py", Lint: run.LintWith, Files: files("main.py", "import os\nprint(eval('1+1'))\n")})
		if err != nil {
			t.Fatal(err)
		}
		if x.Stdout != "2\n" || len(x.Warnings) != 1 || !strings.Contains(x.Warnings[0], `policy rule "eval"`) {
			t.Errorf("stdout %q warnings %q", x.Stdout, x.Warnings)
		}
		found := false
		for _, d := range x.Lint {
			found = found || d.Code == "F401"
		}
		if !found {
			t.Errorf("lint %+v lacks F401 (the default profile's unused import)", x.Lint)
		}
	})
	t.Run("standalone lint with request rules", func(t *testing.T) {
		diags, err := eng.Lint(ctx, files("main.py", "import os\nprint(eval('1'))\n"), pyenv.LintRules{Select: []string{"F"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(diags) != 1 || diags[0].Code != "F401" {
			t.Errorf("select F: %+v, want only F401", diags)
		}
		if _, err := eng.Lint(ctx, files("main.py", "pass\n"), pyenv.LintRules{Ignore: []string{"e501;rm"}}); !errors.Is(err, run.ErrInvalid) {
			t.Errorf("bad selector: %v, want ErrInvalid", err)
		}
	})
}

// hasInstallEvent replays an execution's events.
func hasInstallEvent(t *testing.T, eng *Service, id string) bool {
	t.Helper()
	// The execution has ended: its stream ends at the final event, so the
	// deadline only bounds a broken stream. It is the store's own (a loaded
	// machine, the parallel packages of make test, once took the stream
	// more than 5 s to deliver).
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	ch, err := follow(ctx, eng, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for ev := range ch {
		found = found || ev.Type == EventInstall
	}
	return found
}
