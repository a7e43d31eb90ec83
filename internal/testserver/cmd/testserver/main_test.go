package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/testserver"
)

// launcher is this command, built once for the tests, and pyexec the
// binary it starts.
var launcher, pyexec string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pyexec-testserver-test-")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if pyexec, err = testserver.Binary(dir); err != nil {
			panic(err)
		}
		launcher = filepath.Join(dir, "testserver")
		build := exec.Command("go", "build", "-o", launcher, ".")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			panic(err)
		}
		return m.Run()
	}()
	os.Exit(code)
}

// serveFlags keep the server from fetching anything; without root it
// runs without jails.
func serveFlags() []string {
	flags := []string{"--prepare-base=false", "--provision-tools=false", "--base-packages", "-"}
	if os.Geteuid() != 0 {
		flags = append(flags, "--unsafe-no-isolation")
	}
	return flags
}

// start runs the launcher with args and reads its JSON line.
func start(t *testing.T, args ...string) (*exec.Cmd, io.WriteCloser, ready) {
	t.Helper()
	cmd := exec.Command(launcher, args...)
	cmd.Env = append(testserver.CleanEnv(), testserver.BinaryEnv+"="+pyexec)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		_ = cmd.Wait()
		t.Fatalf("no JSON line from the launcher: %v", err)
	}
	var info ready
	if err := json.Unmarshal(line, &info); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return cmd, stdin, info
}

// eval runs print(6 * 7) on the server with the key.
func eval(t *testing.T, info ready) string {
	t.Helper()
	req, _ := http.NewRequest("POST", info.URL+"/api/v1/eval", strings.NewReader(`{"code":"print(6 * 7)"}`))
	req.Header.Set("Authorization", "Bearer "+info.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status, Stdout string
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("eval: HTTP %d, %v", resp.StatusCode, err)
	}
	return r.Status + " " + r.Stdout
}

// assertCleanedUp checks what the launcher promises after a stop: no data
// directory, no cgroup parent, nothing left below it.
func assertCleanedUp(t *testing.T, info ready) {
	t.Helper()
	if _, err := os.Stat(info.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data directory %s is still there (%v)", info.DataDir, err)
	}
	if dirs := testserver.CgroupDirsNamed(info.CgroupParent); len(dirs) > 0 {
		t.Errorf("the cgroup parent is still there: %v", dirs)
	}
	if left := testserver.Leftovers(info.CgroupParent); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// Without a command, the launcher serves until its stdin ends, then stops
// the server and removes what it made.
func TestLauncherServesUntilStdinEnds(t *testing.T) {
	cmd, stdin, info := start(t, append([]string{"-api-key", "test", "--"}, serveFlags()...)...)
	if info.Binary != pyexec || info.Pid <= 0 || info.APIKey == "" {
		t.Errorf("launcher said %+v", info)
	}
	if got := eval(t, info); got != "completed 42\n" {
		t.Errorf("eval: %q, want completed 42", got)
	}
	resp, err := http.Get(info.URL + "/api/v1/executions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the key: HTTP %d, want 401", resp.StatusCode)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("launcher: %v", err)
	}
	assertCleanedUp(t, info)
}

// With a command, the launcher hands it the server's address and key and
// exits with its status.
func TestLauncherRunsACommand(t *testing.T) {
	script := `[ -n "$PYEXEC_TEST_API_KEY" ] && [ "$PYEXEC_BINARY" = "$1" ] && python3 -c '
import os, sys, urllib.request
r = urllib.request.urlopen(os.environ["PYEXEC_TEST_URL"] + "/health")
sys.exit(0 if r.status == 200 else 1)' && exit 7`
	args := append(append([]string{"-api-key", "test", "--"}, serveFlags()...), "--", "sh", "-c", script, "sh", pyexec)
	cmd, stdin, info := start(t, args...)
	stdin.Close()
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("launcher: %v, want the command's exit status 7", err)
	}
	assertCleanedUp(t, info)
}

// A server that cannot start fails the launcher, which says why.
func TestLauncherReportsAStartFailure(t *testing.T) {
	cmd := exec.Command(launcher, "--", "--no-such-flag")
	cmd.Env = append(testserver.CleanEnv(), testserver.BinaryEnv+"="+pyexec)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "no-such-flag") {
		t.Fatalf("launcher: %v, want exit 1 naming the flag:\n%s", err, out)
	}
}
