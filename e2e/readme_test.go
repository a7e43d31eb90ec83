package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
)

// manualMarker ends the README's shell lines that the test does not run
// (`make run` would start a second server, `make test` the tests again).
const manualMarker = "[manual]"

// readmeLine is one logical shell line of the README (continuations
// joined) and the line number it starts on.
type readmeLine struct {
	no   int
	text string
}

// readmeShellLines returns the lines of the ```sh blocks of the README,
// without blank lines, comment lines and lines marked manual.
func readmeShellLines(t *testing.T, path string) []readmeLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		lines   []readmeLine
		inBlock bool
		cur     *readmeLine
	)
	for i, l := range strings.Split(string(data), "\n") {
		switch {
		case !inBlock && strings.TrimSpace(l) == "```sh":
			inBlock = true
			continue
		case inBlock && strings.TrimSpace(l) == "```":
			inBlock = false
			continue
		case !inBlock:
			continue
		}
		if cur != nil {
			cur.text += "\n" + l
		} else {
			t := strings.TrimSpace(l)
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			cur = &readmeLine{no: i + 1, text: l}
		}
		if strings.HasSuffix(l, "\\") {
			continue
		}
		if !strings.HasSuffix(strings.TrimSpace(cur.text), manualMarker) {
			lines = append(lines, *cur)
		}
		cur = nil
	}
	return lines
}

// readmeFiles are the files the README's lines use, in the directory they
// run in.
var readmeFiles = map[string]string{
	"script.py":         "import sys\n\nsys.stdout.write(' '.join(sys.argv[1:]) + '\\n')\n",
	"project/app.py":    "from helper import greet\n\ngreet()\n",
	"project/helper.py": "def greet():\n    print('hello from the project')\n",
	"long.py":           "import time\n\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.5)\n",
	"report.py":         "import os\n\nos.makedirs('out', exist_ok=True)\nwith open('out/report.csv', 'w') as f:\n    f.write('a,b\\n1,2\\n')\nprint('report written')\n",
	"job.py":            "import tinyreq\n\nprint(tinyreq.NAME)\n",
	"requirements.txt":  "tinyreq\n",
	"main.py":           "import helper\n\nhelper.run()\n",
	"helper.py":         "def run():\n    print('async project')\n",
}

// lintMayFail: `pyexec lint` exits 1 when ruff has diagnostics, as the
// README says.
func allowedExit(line string) []int {
	if strings.HasPrefix(strings.TrimSpace(line), "pyexec lint ") {
		return []int{0, 1}
	}
	return []int{0}
}

// TestREADME runs every shell line of README.md as written, in order in
// one shell (so ID=... and export PATH=... carry over), in a directory
// with the files they use and bin/pyexec, against a server on a free port
// that stands for localhost:8080. Lines ending in [manual] are skipped.
func TestREADME(t *testing.T) {
	needRoot(t)
	lines := readmeShellLines(t, "../README.md")
	if len(lines) < 20 {
		t.Fatalf("only %d shell lines found in README.md", len(lines))
	}
	uv, ruff := pyenvtest.Tools(t)
	ix := pyenvtest.NewIndex(t,
		pyenvtest.Wheel{Name: "tinybase", Version: "1.0", Files: map[string]string{"tinybase.py": "NAME = 'base'\n"}},
		pyenvtest.Wheel{Name: "tinyreq", Version: "2.0", Files: map[string]string{"tinyreq.py": "NAME = 'req'\n"}},
	)
	// The settings the env commands and --local read from the
	// environment, the same as the server's flags.
	settings := []string{"PYEXEC_ENV_DIR=" + pyenvtest.EnvDir(t), "PYEXEC_UV=" + uv, "PYEXEC_RUFF=" + ruff,
		"PYEXEC_INDEX_URL=" + ix.URL, "PYEXEC_BASE_PACKAGES=tinybase", "PYEXEC_CGROUP_PARENT=" + cgroupParent}
	s := startServerEnv(t, t.TempDir(), cleanEnv(settings...))

	work := t.TempDir()
	for name, content := range readmeFiles {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := exec.Command("tar", "cf", filepath.Join(work, "code.tar"), "-C", work, "main.py", "helper.py").Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(binary, filepath.Join(work, "bin", "pyexec")); err != nil {
		t.Fatal(err)
	}

	hostPort := strings.TrimPrefix(s.url, "http://")
	// curl is the one tool the README uses that a build machine may lack.
	_, curlErr := exec.LookPath("curl")
	var script strings.Builder
	for _, l := range lines {
		if curlErr != nil && strings.Contains(l.text, "curl ") {
			t.Logf("README.md:%d not run: curl is not installed", l.no)
			continue
		}
		text := strings.ReplaceAll(l.text, "http://localhost:8080", s.url)
		text = strings.ReplaceAll(text, "localhost:8080", hostPort)
		var ok []string
		for _, c := range allowedExit(l.text) {
			ok = append(ok, fmt.Sprintf("[ $rc -ne %d ]", c))
		}
		fmt.Fprintf(&script, "echo '@@ README.md:%d' >&2\n%s\nrc=$?; if %s; then echo \"README.md:%d exited $rc\" >&2; exit 1; fi\n",
			l.no, text, strings.Join(ok, " && "), l.no)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script.String())
	cmd.Dir = work
	cmd.Env = cleanEnv(append(settings, "PYEXEC_SERVER="+s.url)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's lines failed (%v)\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	// A few outcomes a reader is promised.
	for _, want := range []string{"1024\n", "42\n", "hello from the project\n", "req\n", "report written\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	if got, err := os.ReadFile(filepath.Join(work, "report.csv")); err != nil || string(got) != "a,b\n1,2\n" {
		t.Errorf("report.csv %q (%v)", got, err)
	}
}
