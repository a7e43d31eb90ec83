package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
)

// TestEnvironments drives the built binary with dependency environments
// installed from a loopback index: the base environment built at start-up
// in the background, --requirements end to end, detection, lint and the
// env commands on the same directory.
func TestEnvironments(t *testing.T) {
	needRoot(t)
	uv, ruff := pyenvtest.Tools(t)
	ix := pyenvtest.NewIndex(t,
		pyenvtest.Wheel{Name: "tinybase", Version: "1.0", Files: map[string]string{"tinybase.py": "NAME = 'base'\n"}},
		pyenvtest.Wheel{Name: "tinyreq", Version: "2.0", Files: map[string]string{"tinyreq.py": "NAME = 'req'\n"}},
		pyenvtest.Wheel{Name: "PyYAML", Version: "6.0.99", Files: map[string]string{"yaml/__init__.py": "def safe_load(s):\n    return [s]\n"}},
	)
	envDir := pyenvtest.EnvDir(t)
	envFlags := []string{"--env-dir", envDir, "--uv", uv, "--index-url", ix.URL, "--base-packages", "tinybase"}
	srv := startServer(t, t.TempDir(), append(envFlags, "--ruff", ruff, "--prepare-base=true")...)

	t.Run("the base environment is built in the background", func(t *testing.T) {
		deadline := time.Now().Add(time.Minute)
		for {
			var h struct {
				BaseEnvironment string `json:"base_environment"`
			}
			resp, err := http.Get(srv.url + "/health")
			if err != nil {
				t.Fatal(err)
			}
			err = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if h.BaseEnvironment == "ready" {
				break
			}
			if h.BaseEnvironment != "building" || time.Now().After(deadline) {
				t.Fatalf("base_environment = %q\n%s", h.BaseEnvironment, srv.logs)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("a script needing only the base runs in it", func(t *testing.T) {
		r := cli(t, srv.url, "import tinybase\nprint(tinybase.NAME)\n", "run", "-q")
		if r.code != 0 || r.stdout != "base\n" {
			t.Fatalf("%+v", r)
		}
	})

	// The base environment is the default: code that needs nothing else
	// runs in it, whether detection sees its imports or not.
	t.Run("code without detectable imports runs in the base", func(t *testing.T) {
		r := cli(t, srv.url, "name = 'tiny' + 'base'\nprint(__import__(name).NAME)\n", "run", "-q")
		if r.code != 0 || r.stdout != "base\n" {
			t.Fatalf("%+v", r)
		}
	})

	t.Run("code beyond detection is a 400", func(t *testing.T) {
		// The scan leaves latin-1 source to the interpreter, whose ast
		// cannot walk a sum of 800 terms.
		code := "# coding: latin-1\ns = '\xe9'\nx = " + strings.Repeat("1 + ", 800) + "1\n"
		body, _ := json.Marshal(map[string]string{"code": code})
		resp, err := http.Post(srv.url+"/api/v1/eval", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "import detection") {
			t.Fatalf("HTTP %d: %s", resp.StatusCode, msg)
		}
	})

	t.Run("--no-detect-imports still runs in the base", func(t *testing.T) {
		plain := startServer(t, t.TempDir(), append(envFlags, "--no-detect-imports", "--prepare-base=true")...)
		deadline := time.Now().Add(time.Minute)
		for {
			r := cli(t, plain.url, "import tinybase\nprint(tinybase.NAME)\n", "run", "-q")
			if r.code == 0 && r.stdout == "base\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%+v\n%s", r, plain.logs)
			}
			time.Sleep(200 * time.Millisecond) // the base is found ready at start, or built again
		}
	})

	t.Run("--requirements installs before running", func(t *testing.T) {
		dir := t.TempDir()
		req := filepath.Join(dir, "requirements.txt")
		script := filepath.Join(dir, "job.py")
		if err := os.WriteFile(req, []byte("tinyreq==2.0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(script, []byte("import importlib\nprint(importlib.import_module('tinyreq').NAME)\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := cli(t, srv.url, "", "run", "--requirements", req, script)
		if r.code != 0 || r.stdout != "req\n" {
			t.Fatalf("%+v\n%s", r, srv.logs)
		}
	})

	t.Run("follow shows install progress", func(t *testing.T) {
		sub := cli(t, srv.url, "import yaml\nprint(yaml.safe_load('x'))\n", "submit")
		if sub.code != 0 {
			t.Fatalf("%+v", sub)
		}
		r := cli(t, srv.url, "", "follow", strings.TrimSpace(sub.stdout))
		if r.code != 0 || r.stdout != "['x']\n" || !strings.Contains(r.stderr, "install: ") {
			t.Fatalf("%+v", r)
		}
	})

	t.Run("a session has the base, and -r layers a package over it", func(t *testing.T) {
		r := cli(t, srv.url, "", "session", "create", "-r", "tinyreq==2.0")
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || !strings.HasPrefix(id, "ses_") {
			t.Fatalf("%+v\n%s", r, srv.logs)
		}
		defer cli(t, srv.url, "", "session", "rm", id)
		r = cli(t, srv.url, "", "session", "exec", id, "import tinybase, tinyreq\n(tinybase.NAME, tinyreq.NAME)")
		if r.code != 0 || !strings.Contains(r.stdout, "('base', 'req')") {
			t.Fatalf("%+v", r)
		}
	})

	t.Run("lint through the server", func(t *testing.T) {
		r := cli(t, srv.url, "import os\n", "lint", "-", "--select", "F")
		var diags []struct {
			Code string `json:"code"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &diags); r.code != 1 || err != nil || len(diags) != 1 || diags[0].Code != "F401" {
			t.Fatalf("%+v", r)
		}
	})

	t.Run("env list sees what the server built", func(t *testing.T) {
		r := cli(t, srv.url, "", append([]string{"env", "list"}, envFlags...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "(base) [tinybase]") || strings.Count(r.stdout, "tinybase") != 1 || !strings.Contains(r.stdout, "[tinyreq==2.0]") {
			t.Fatalf("%+v", r)
		}
	})
}
