package api

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// newRealEnvServer serves the API over the real engine with dependency
// environments installed by uv from a loopback index, a policy and the
// ruff linter.
func newRealEnvServer(t *testing.T) (*httptest.Server, *pyenv.Environments, *pyenvtest.Index) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real jails and installs; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the jail builds namespaces, cgroups and mounts")
	}
	uv, ruff := pyenvtest.Tools(t)
	ix := pyenvtest.NewIndex(t,
		pyenvtest.Wheel{Name: "PyYAML", Version: "6.0.99", Files: map[string]string{"yaml/__init__.py": "def safe_load(s):\n    return {'loaded': s}\n"}},
		pyenvtest.Wheel{Name: "tinyreq", Version: "1.2", Files: map[string]string{"tinyreq.py": "VERSION = '1.2'\n"}},
	)
	envs, err := pyenv.NewEnvironments(pyenv.EnvConfig{Dir: pyenvtest.EnvDir(t), IndexURL: ix.URL, UV: uv, Base: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(envs.Close)
	eng := enginetest.Start(t, engine.Config{Concurrency: 2, QueueSize: 4, DefaultTimeout: 20 * time.Second},
		func(_ *store.NATS, jails *sandbox.Manager) engine.Deps {
			res, err := pyenv.NewResolver(pyenv.NewAnalyzer(jails, pyenv.AnalyzerConfig{}), pyenv.ResolverConfig{
				Policy: pyenv.Policy{Rules: []pyenv.Rule{{Name: "no-subprocess", Action: pyenv.Deny, Imports: []string{"subprocess"}, Message: "this course does not use subprocesses"}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			linter, err := pyenv.NewLinter(jails, pyenv.LintConfig{Ruff: ruff})
			if err != nil {
				t.Fatal(err)
			}
			return engine.Deps{Envs: engine.PyenvEnvironments{Resolver: res, Envs: envs}, Linter: engine.PyenvLinter{L: linter}}
		})
	s, err := New(eng, Options{Config: config.Default(), Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts, envs, ix
}

func TestRealEnvironments(t *testing.T) {
	ts, envs, ix := newRealEnvServer(t)
	wheel := pyenvtest.Wheel{Name: "tinyreq", Version: "1.2"}.Filename()
	syncExec := func(t *testing.T, meta string, files ...tarEntry) (int, ExecutionResult, []byte) {
		t.Helper()
		ct, body := multipartBody(t, makeTar(t, tar.FormatPAX, files...), meta, metaJSONPart)
		code, _, resp := call(t, ts, http.MethodPost, "/api/v1/exec/sync", ct, body, nil)
		if code != 200 {
			return code, ExecutionResult{}, resp
		}
		return code, decode[ExecutionResult](t, resp), resp
	}
	main := tarEntry{Name: "main.py", Body: "import tinyreq\nprint(tinyreq.VERSION)\n"}

	t.Run("requirements_txt installs, then the environment is reused without uv", func(t *testing.T) {
		fetched := 0
		for run := 1; run <= 2; run++ {
			code, r, resp := syncExec(t, `{"requirements_txt":"tinyreq==1.2\n"}`, main)
			if code != 200 || r.Status != "completed" || r.Stdout != "1.2\n" {
				t.Fatalf("run %d: %d %s", run, code, resp)
			}
			if got := envs.Stats().Builds; got != 1 {
				t.Fatalf("run %d: %d environments built, want 1", run, got)
			}
			got := ix.Fetches(wheel)
			if run == 1 && got == 0 || run == 2 && got != fetched {
				t.Fatalf("run %d: the index served the wheel %d times in all (%d after run 1)", run, got, fetched)
			}
			fetched = got
		}
	})

	t.Run("import yaml is detected and installs pyyaml", func(t *testing.T) {
		code, _, body := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json",
			[]byte(`{"code":"import yaml\nprint(yaml.safe_load('a'))"}`), nil)
		r := decode[ExecutionResult](t, body)
		if code != 200 || r.Status != "completed" || r.Stdout != "{'loaded': 'a'}\n" {
			t.Fatalf("%d %s", code, body)
		}
	})

	t.Run("a policy denial is a 400 naming the rule", func(t *testing.T) {
		code, _, body := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json",
			[]byte(`{"code":"import subprocess\nsubprocess.run(['id'])"}`), nil)
		msg := decode[Error](t, body).Message
		if code != 400 || !strings.Contains(msg, `policy rule "no-subprocess"`) || !strings.Contains(msg, "main.py:1") {
			t.Fatalf("%d %s", code, body)
		}
	})

	t.Run("a bad requirement is a 400", func(t *testing.T) {
		code, _, resp := syncExec(t, `{"requirements_txt":"-e git+https://example.com/x.git\n"}`, main)
		if code != 400 || !strings.Contains(decode[Error](t, resp).Message, "requirements_txt") {
			t.Fatalf("%d %s", code, resp)
		}
	})

	t.Run("lint only does not run the code", func(t *testing.T) {
		code, _, body := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json",
			[]byte(`{"code":"import os\nprint('ran')\n","lint":"only"}`), nil)
		r := decode[ExecutionResult](t, body)
		if code != 200 || r.Status != "completed" || r.Stdout != "" || len(r.Lint) == 0 {
			t.Fatalf("%d %s", code, body)
		}
		found := false
		for _, d := range r.Lint {
			found = found || d.Code == "F401" && d.Location == LintPosition{Line: 1, Column: 8}
		}
		if !found {
			t.Errorf("no F401 at 1:8 in %s", body)
		}
	})

	t.Run("lint endpoint returns the documented list", func(t *testing.T) {
		code, _, body := call(t, ts, http.MethodPost, "/api/v1/lint", "application/json",
			[]byte(`{"code":"import os\ndef f():\n    return undefined_name\n","select":["F"]}`), nil)
		var diags []LintDiagnostic
		if err := json.Unmarshal(body, &diags); code != 200 || err != nil {
			t.Fatalf("%d %s", code, body)
		}
		var codes []string
		for _, d := range diags {
			codes = append(codes, d.Code)
		}
		if strings.Join(codes, ",") != "F401,F821" || diags[1].Location != (LintPosition{Line: 3, Column: 12}) ||
			diags[1].EndLocation != (LintPosition{Line: 3, Column: 26}) || string(diags[1].Fix) != "null" || diags[0].Filename != "main.py" {
			t.Fatalf("diagnostics %s", body)
		}
	})

	t.Run("pre_commands run before the script", func(t *testing.T) {
		code, r, resp := syncExec(t, `{"pre_commands":["echo prepared > marker.txt","echo from-pre"]}`,
			tarEntry{Name: "main.py", Body: "print(open('marker.txt').read().strip())\n"})
		if code != 200 || r.Status != "completed" || r.Stdout != "from-pre\nprepared\n" {
			t.Fatalf("%d %s", code, resp)
		}
	})

	t.Run("a failing pre_command ends the execution with its output", func(t *testing.T) {
		code, r, resp := syncExec(t, `{"pre_commands":["echo building; echo oops >&2; exit 4","echo never"]}`,
			tarEntry{Name: "main.py", Body: "print('script ran')\n"})
		if code != 200 || r.Status != "completed" || r.Stdout != "building\n" || r.Stderr != "oops\n" || r.Error != "" ||
			r.Reason != "pre_command_failed" || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "pre_commands[0]") || r.ExitCode != 4 {
			t.Fatalf("%d %s", code, resp)
		}
	})

	t.Run("install progress is streamed as install events", func(t *testing.T) {
		ct, body := multipartBody(t, makeTar(t, tar.FormatPAX, main), `{"requirements_txt":"tinyreq==1.2\npyyaml\n"}`, metaFormField)
		code, _, resp := call(t, ts, http.MethodPost, "/api/v1/exec/async", ct, body, nil)
		if code != http.StatusAccepted {
			t.Fatalf("%d %s", code, resp)
		}
		id := decode[AsyncAccepted](t, resp).ExecutionID
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/v1/executions/"+id+"/events", nil)
		res, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var kinds []string
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if k, ok := strings.CutPrefix(sc.Text(), "event: "); ok && (len(kinds) == 0 || kinds[len(kinds)-1] != k) {
				kinds = append(kinds, k)
			}
		}
		if got := strings.Join(kinds, ","); got != "status,install,stdout,status" {
			t.Fatalf("event kinds %s, want status,install,stdout,status", got)
		}
	})
}
