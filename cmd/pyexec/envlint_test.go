//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
)

const lintResult = `[{"code":"F401","message":"` + "`os`" + ` imported but unused","location":{"line":1,"column":8},` +
	`"end_location":{"line":1,"column":10},"fix":{"applicability":"safe","message":"Remove unused import","edits":[]},"filename":"bad.py"}]`

func TestLintCommand(t *testing.T) {
	tests := []struct {
		name      string
		result    string
		args      []string
		stdin     string
		wantCode  int
		wantFile  string
		wantCodes []string
	}{
		{name: "diagnostics exit 1", result: lintResult, args: []string{writeScript(t, "bad.py", "import os\n")},
			wantCode: 1, wantFile: "bad.py", wantCodes: []string{"F401"}},
		{name: "clean code exits 0", result: `[]`, args: []string{writeScript(t, "good.py", "print(1)\n"), "--select", "E,F"},
			wantCode: 0, wantFile: "good.py"},
		{name: "stdin is main.py", result: `[]`, args: []string{"-"}, stdin: "x = 1\n", wantCode: 0, wantFile: "main.py"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{t: t, result: tt.result}
			var out, errOut bytes.Buffer
			root := newRootCmd()
			root.SetArgs(append([]string{"lint", "--server", api.start()}, tt.args...))
			root.SetIn(strings.NewReader(tt.stdin))
			root.SetOut(&out)
			root.SetErr(&errOut)
			code := 0
			if err := root.Execute(); err != nil {
				code = err.(*exitStatus).code
			}
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %s", code, tt.wantCode, errOut.String())
			}
			var diags []struct {
				Code string `json:"code"`
			}
			if err := json.Unmarshal(out.Bytes(), &diags); err != nil {
				t.Fatalf("stdout is not a JSON list: %v\n%s", err, out.String())
			}
			var codes []string
			for _, d := range diags {
				codes = append(codes, d.Code)
			}
			if strings.Join(codes, ",") != strings.Join(tt.wantCodes, ",") {
				t.Errorf("codes %v, want %v", codes, tt.wantCodes)
			}
			reqs := api.requests()
			if len(reqs) != 1 || reqs[0].path != "/api/v1/lint" {
				t.Fatalf("requests %+v", reqs)
			}
			files, _ := reqs[0].body["files"].([]any)
			if len(files) != 1 || files[0].(map[string]any)["name"] != tt.wantFile {
				t.Errorf("sent files %v, want one named %s", files, tt.wantFile)
			}
		})
	}
}

func TestFollowShowsInstallProgress(t *testing.T) {
	stream := sse(1, "status", "pending") + sse(2, "install", "installing pyyaml with uv") +
		sse(3, "install", "environment ready in 1s") + sse(4, "status", "running") + sse(5, "stdout", "ok\n") + sse(6, "status", "completed")
	tests := []struct {
		name       string
		flags      []string
		wantStderr string
	}{
		{"plain lines when stderr is not a terminal", nil, "install: installing pyyaml with uv\ninstall: environment ready in 1s\n"},
		{"quiet hides them", []string{"-q"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{t: t, events: stream, result: resOK}
			code, stdout, stderr := runCLI(append([]string{"follow", "--server", api.start(), "exe_1"}, tt.flags...)...)
			if code != 0 || stdout != "ok\n" || stderr != tt.wantStderr {
				t.Errorf("exit %d stdout %q stderr %q, want stderr %q", code, stdout, stderr, tt.wantStderr)
			}
		})
	}
}

func TestProgressSpinnerOnATerminal(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, tty: true}
	p.Install("installing pyyaml with uv")
	p.Install("  Downloaded pyyaml  ")
	p.Stop()
	first := buf.String()
	if !strings.HasPrefix(first, "\r| installing dependencies: installing pyyaml with uv\x1b[K") ||
		!strings.Contains(first, "installing dependencies: Downloaded pyyaml\x1b[K") ||
		!strings.HasSuffix(first, "\r\x1b[K") || strings.Contains(first, "\n") {
		t.Errorf("spinner output %q", first)
	}
	// Output of the program cleared the line; an install line after it
	// brings the spinner back, and the last Stop clears it again.
	p.Install("Installed pyyaml")
	p.Stop()
	p.Stop()
	second := strings.TrimPrefix(buf.String(), first)
	if !strings.Contains(second, "installing dependencies: Installed pyyaml\x1b[K") || !strings.HasSuffix(second, "\r\x1b[K") ||
		strings.Count(second, "\r\x1b[K") != 1 {
		t.Errorf("spinner output after a stop %q", second)
	}
	if isTerminal(&buf) {
		t.Error("a buffer is not a terminal")
	}
}

func TestProgressNotesOnlyOnATerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, false)
	p.Note("starting a Python session")
	p.Stop()
	if buf.Len() != 0 {
		t.Errorf("a note reached a non-terminal: %q", buf.String())
	}
}

func TestEnvCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("installs uv and builds an environment; skipped with -short")
	}
	uv, _ := pyenvtest.Tools(t)
	ix := pyenvtest.NewIndex(t, pyenvtest.Wheel{Name: "tinybase", Version: "1.0", Files: map[string]string{"tinybase.py": "X = 1\n"}})
	dir := pyenvtest.EnvDir(t)
	flags := []string{"--env-dir", dir, "--uv", uv, "--index-url", ix.URL, "--base-packages", "tinybase"}

	t.Run("an empty directory lists nothing", func(t *testing.T) {
		code, stdout, stderr := runCLI(append([]string{"env", "list"}, flags...)...)
		if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.HasPrefix(stdout, "KEY") {
			t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
		}
	})
	t.Run("prepare builds the base environment", func(t *testing.T) {
		code, stdout, stderr := runCLI(append([]string{"env", "prepare"}, flags...)...)
		if code != 0 || !strings.HasPrefix(stdout, "base environment ") || !strings.Contains(stdout, dir) {
			t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
		}
	})
	t.Run("list shows it as the base", func(t *testing.T) {
		code, stdout, stderr := runCLI(append([]string{"env", "list"}, flags...)...)
		if code != 0 || !strings.Contains(stdout, "(base) [tinybase]") {
			t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
		}
	})
	t.Run("prune keeps it under the cap, --all removes it", func(t *testing.T) {
		code, stdout, _ := runCLI(append([]string{"env", "prune"}, flags...)...)
		if code != 0 || stdout != "" {
			t.Fatalf("prune: exit %d stdout %q", code, stdout)
		}
		code, stdout, _ = runCLI(append([]string{"env", "prune", "--all"}, flags...)...)
		if code != 0 || !strings.HasPrefix(stdout, "removed ") {
			t.Fatalf("prune --all: exit %d stdout %q", code, stdout)
		}
	})
	t.Run("no base configured", func(t *testing.T) {
		code, _, stderr := runCLI("env", "prepare", "--env-dir", dir, "--base-packages=-")
		if code != 1 || !strings.Contains(stderr, "no base environment is configured") {
			t.Fatalf("exit %d stderr %q", code, stderr)
		}
	})
	t.Run("an env dir jails cannot mount is refused", func(t *testing.T) {
		code, _, stderr := runCLI("env", "list", "--env-dir", "/tmp/pyexec-envs-test")
		if code != 2 || !strings.Contains(stderr, "PYEXEC_ENV_DIR") {
			t.Fatalf("exit %d stderr %q", code, stderr)
		}
	})
}
