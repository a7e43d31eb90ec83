//go:build linux

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/config"
)

// notVariables are PYEXEC_ names in the code that no user sets: the
// jail's and the runner's own plumbing, NATS stream and bucket names, and
// the test harness's settings.
var notVariables = []string{
	// the jail's output socket, set for the payload by the jail
	"PYEXEC_RELAY",
	// set by the pre_commands wrapper for the runner
	"PYEXEC_PRE_FAILED",
	// NATS stream and bucket names
	"PYEXEC_REQUESTS", "PYEXEC_QUEUE", "PYEXEC_EXECUTIONS", "PYEXEC_EVENTS", "PYEXEC_AUDIT", "PYEXEC_ARTIFACTS", "PYEXEC_INDEX",
	"PYEXEC_NODES",
	"PYEXEC_SESSIONS", "PYEXEC_SNAPSHOTS",
	"PYEXEC_WORKSPACES", "PYEXEC_WORKSPACE_BLOBS",
	// the test harness
	"PYEXEC_TEST_TOOLS", "PYEXEC_TEST_ENV_DIR", "PYEXEC_TEST_UV_CACHE", "PYEXEC_EGRESS_TEST_WORLD", "PYEXEC_EGRESS_TEST_CLIENTS",
	"PYEXEC_TEST_FORK_BOMBS", "PYEXEC_TEST_FORK_BOMB_PIDS", "PYEXEC_TEST_FORK_BOMB_WALL",
	// internal/testserver and its launcher (docs/testing.md), and CI's caches
	"PYEXEC_BINARY", "PYEXEC_TESTSERVER", "PYEXEC_TEST_URL", "PYEXEC_TEST_API_KEY", "PYEXEC_CI_CACHE",
}

// variablesInCode returns every PYEXEC_* name in the repository's Go code
// (tests aside) that is not in notVariables.
func variablesInCode(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`PYEXEC_[A-Z0-9_]*[A-Z0-9]`)
	var names []string
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".venv")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, n := range re.FindAllString(string(src), -1) {
			if !slices.Contains(notVariables, n) && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 10 {
		t.Fatalf("found only %v: is the walk reading the repository?", names)
	}
	return names
}

// Every variable the code reads is named in the help of serve (the
// server's) or of the client commands (PYEXEC_SERVER, PYEXEC_API_KEY).
func TestHelpListsEveryVariable(t *testing.T) {
	_, serveHelp, _ := runCLI("serve", "--help")
	_, runHelp, _ := runCLI("run", "--help")
	for _, name := range variablesInCode(t) {
		re := regexp.MustCompile(`\b` + name + `\b`)
		if !re.MatchString(serveHelp) && !re.MatchString(runHelp) {
			t.Errorf("%s is read by the code but neither `serve --help` nor `run --help` names it", name)
		}
	}
}

func TestServeHelpIsGroupedAndHasOnlyServeFlags(t *testing.T) {
	code, help, stderr := runCLI("serve", "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, name := range clientFlagNames() {
		if strings.Contains(help, "--"+name+" ") {
			t.Errorf("serve --help shows the client flag --%s", name)
		}
	}
	last := -1
	for _, g := range config.FlagGroups() {
		i := strings.Index(help, "\n"+g.Title+":\n")
		if i < last {
			t.Errorf("topic %q missing or out of order", g.Title)
		}
		last = i
		// The first flag of the topic is shown under its title, before the next one.
		section := help[i:]
		if j := strings.Index(section[1:], "\n\n"); j > 0 {
			section = section[:j+1]
		}
		for _, f := range g.Flags {
			if !strings.Contains(section, "--"+f+" ") {
				t.Errorf("--%s is not under %q", f, g.Title)
			}
		}
	}
	if strings.Contains(help, "\n"+config.OtherGroup+":\n") {
		t.Errorf("serve has flags in no topic (add them to config.FlagGroups):\n%s", help)
	}
}

// The client flags stay global for the client commands (before or after
// the subcommand) but are refused by the commands that do not read them.
func TestClientFlagsAreRefusedOutsideTheClient(t *testing.T) {
	for _, args := range [][]string{{"serve", "--async"}, {"--image", "python:3.12", "serve"}, {"doctor", "--server", "http://x"}, {"version", "-q"}} {
		code, _, stderr := runCLI(args...)
		if code != 1 || !strings.Contains(stderr, "is a flag of the client commands") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// The README and the docs name no variable that help does not list (a
// renamed or removed setting leaves no stale line behind).
func TestDocsNameOnlyListedVariables(t *testing.T) {
	_, serveHelp, _ := runCLI("serve", "--help")
	_, runHelp, _ := runCLI("run", "--help")
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs found (%v)", err)
	}
	re := regexp.MustCompile(`PYEXEC_[A-Z0-9_]*[A-Z0-9]`)
	for _, p := range append(docs, "../../README.md", "../../python/README.md") {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range re.FindAllString(string(data), -1) {
			word := regexp.MustCompile(`\b` + name + `\b`)
			if !slices.Contains(notVariables, name) && !word.MatchString(serveHelp) && !word.MatchString(runHelp) {
				t.Errorf("%s names %s, which no help lists", filepath.Base(p), name)
			}
		}
	}
}
