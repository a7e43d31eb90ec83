//go:build linux

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/pyexec/pyexec/internal/provision"
)

// doctorJSON runs `pyexec doctor --json` with args and returns its checks
// by name (the last of a name wins) and its exit code.
func doctorJSON(t *testing.T, args ...string) (map[string]doctorCheck, int) {
	t.Helper()
	code, out, errOut := runCLI(append([]string{"doctor", "--json"}, args...)...)
	var checks []doctorCheck
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatalf("doctor --json printed no JSON (exit %d): %v\n%s\n%s", code, err, out, errOut)
	}
	byName := map[string]doctorCheck{}
	for _, c := range checks {
		byName[c.Layer] = c
	}
	return byName, code
}

func TestDoctorChecksToolsDataDirDiskAndIndex(t *testing.T) {
	index := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodHead {
			t.Errorf("doctor sent %s to the index, want HEAD", r.Method)
		}
	}))
	defer index.Close()
	data := filepath.Join(t.TempDir(), "data")
	t.Setenv("PATH", t.TempDir()) // no uv or ruff on it

	checks, _ := doctorJSON(t, "--data-dir", data, "--provision-tools=false", "--index-url", index.URL+"/simple", "--check-index")
	for _, name := range []string{"python", "uv", "ruff", "data-dir", "disk", "index"} {
		if _, ok := checks[name]; !ok {
			t.Errorf("no %s check in %v", name, checks)
		}
	}
	for _, name := range []string{"uv", "ruff"} {
		if c := checks[name]; c.OK || c.Required || c.Fix == "" {
			t.Errorf("%s hidden from PATH with provisioning off: %+v, want absent, not required, with a fix", name, c)
		}
	}
	if c := checks["data-dir"]; !c.OK || !c.Required {
		t.Errorf("a data dir that can be created: %+v", c)
	}
	if c := checks["index"]; !c.OK || c.Skipped {
		t.Errorf("a reachable index: %+v", c)
	}

	// With provisioning on, the fetched tools are found in DATA_DIR/tools.
	fake := filepath.Join(data, "tools", "ruff-"+provision.Ruff.Version, "ruff")
	if err := os.MkdirAll(filepath.Dir(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	index.Close()
	checks, _ = doctorJSON(t, "--data-dir", data, "--index-url", index.URL+"/simple", "--check-index")
	if c := checks["ruff"]; !c.OK {
		t.Errorf("ruff fetched into the data dir: %+v", c)
	}
	if c := checks["uv"]; !c.OK || c.Fix == "" {
		t.Errorf("uv not fetched yet but provisioning on: %+v, want ok with what to do", c)
	}
	if c := checks["index"]; c.OK || c.Fix == "" {
		t.Errorf("an unreachable index: %+v, want absent with a fix", c)
	}
	checks, _ = doctorJSON(t, "--data-dir", data)
	if c := checks["index"]; !c.Skipped {
		t.Errorf("without --check-index the index is not asked: %+v", c)
	}
}
