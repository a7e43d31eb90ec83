package pool

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// probeModule is the tiny package the test environment has, preloaded by
// its fork server.
const probeModule = "pyexec_preload_probe"

// preloadEnv makes a virtual environment of the system interpreter holding
// probeModule, readable by the jail's user, and returns its directory.
// The module runs init when imported.
func preloadEnv(t *testing.T, init string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "pyexec-lean-env-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(python, "-m", "venv", "--without-pip", dir).CombinedOutput(); err != nil {
		t.Skipf("needs %s -m venv: %v: %s", python, err, out)
	}
	sites, err := filepath.Glob(filepath.Join(dir, "lib", "python3*", "site-packages"))
	if err != nil || len(sites) != 1 {
		t.Fatalf("the venv's site-packages: %v %v", sites, err)
	}
	pkg := filepath.Join(sites[0], probeModule)
	if err := os.Mkdir(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "__init__.py"), []byte(init+"LOADED = True\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// envTarget is where the jail sees the environment (/tmp is its own).
const envTarget = "/opt/pyexec-lean-env"

// envSpec is spec, run by the interpreter of the environment env.
func envSpec(env, code string) sandbox.Spec {
	s := spec(code)
	s.Argv = runner.Argv(envTarget+"/bin/python", runner.Options{Entrypoint: "main.py", EvalLastExpr: true})
	s.Mounts = []sandbox.Mount{{Source: env, Target: envTarget}}
	return s
}

// forkWait is how long a test waits for a fork server to serve: a minute,
// or PYEXEC_TEST_FORK_WAIT (a duration). Under emulation (make test-vm) a
// server that imports numpy, pandas and matplotlib takes minutes.
func forkWait(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("PYEXEC_TEST_FORK_WAIT")
	if v == "" {
		return time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("PYEXEC_TEST_FORK_WAIT=%q: want a duration", v)
	}
	return d
}

// runForked runs s until a run is served by a forked execution and returns
// that run's result and whether it counted as lean; it fails the test after
// forkWait.
func runForked(t *testing.T, p *Pool, s sandbox.Spec) (sandbox.Result, bool) {
	t.Helper()
	deadline := time.Now().Add(forkWait(t))
	for {
		before := p.Stats()
		res := run(t, p, s)
		after := p.Stats()
		if after.ForkedRuns > before.ForkedRuns {
			return res, after.LeanRuns > before.LeanRuns
		}
		if time.Now().After(deadline) {
			t.Fatalf("no forked execution: %+v", after)
		}
	}
}

// TestLeanCodeForksWithoutPreloads: in an environment that has a preloaded
// module, code that imports only the standard library forks from a server
// that did not import it, code that imports it finds it imported already,
// and lean code that imports it by a way the scan cannot see still gets it.
func TestLeanCodeForksWithoutPreloads(t *testing.T) {
	p := newPool(t, Config{ForkServer: true, Preload: []string{probeModule}})
	env := preloadEnv(t, "")
	for _, tt := range []struct {
		name, code, want string
		lean             bool
	}{
		{"stdlib only", "import sys\nprint('" + probeModule + "' in sys.modules)\n", "False\n", true},
		{"importing the preload", "import sys\nprint('" + probeModule + "' in sys.modules)\nimport " + probeModule + "\nprint(" + probeModule + ".LOADED)\n", "True\nTrue\n", false},
		// Correctness never depends on the scan: hidden from it, the
		// import happens in the execution, cold.
		{"importing it out of the scan's sight", "import sys\nb = vars(sys.modules['builtins'])\nm = b['__imp' + 'ort__']('" + probeModule + "')\nprint(m.LOADED)\n", "True\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, lean := runForked(t, p, envSpec(env, tt.code))
			if res.Status != sandbox.StatusOK || res.ExitCode != 0 || string(res.Stdout) != tt.want {
				t.Fatalf("status %s exit %d stdout %q (want %q) stderr %s", res.Status, res.ExitCode, res.Stdout, tt.want, res.Stderr)
			}
			if lean != tt.lean {
				t.Fatalf("lean %v, want %v: %+v", lean, tt.lean, p.Stats())
			}
		})
	}
	if st := p.Stats(); st.Templates != 2 || st.TemplateMemory <= 0 {
		t.Fatalf("want a full and a lean fork server, with their memory: %+v", st)
	}
}

// TestLeanCodeWithoutPreloadsSharesTheServer: where the environment has
// none of the preloads, lean code and any other code fork from one server.
func TestLeanCodeWithoutPreloadsSharesTheServer(t *testing.T) {
	p := newPool(t, Config{ForkServer: true, Preload: []string{"pyexec_no_such_module"}})
	for _, tt := range []struct{ code, want string }{
		{"import os\nprint(os.sep)\n", "/\n"},
		{"if False:\n    import numpy\nprint(1)\n", "1\n"},
		{"import os\nprint(os.sep)\n", "/\n"},
	} {
		if res, _ := runForked(t, p, spec(tt.code)); string(res.Stdout) != tt.want {
			t.Fatalf("stdout %q, want %q (stderr %s)", res.Stdout, tt.want, res.Stderr)
		}
	}
	if st := p.Stats(); st.Templates != 1 || st.LeanRuns == 0 {
		t.Fatalf("want one fork server that served lean code: %+v", st)
	}
}

// TestLeanCodeForksWhileTheFullServerStarts: a full fork server that takes
// long to import its preloads does not hold up the executions of the lean
// one.
func TestLeanCodeForksWhileTheFullServerStarts(t *testing.T) {
	p := newPool(t, Config{ForkServer: true, Preload: []string{probeModule}})
	// Only the fork server (uid 0) sleeps; executions run as the sandbox
	// user.
	env := preloadEnv(t, "import os, time\nif os.getuid() == 0:\n    time.sleep(4)\n")
	lean := envSpec(env, "print(1)\n")
	if _, ok := runForked(t, p, lean); !ok {
		t.Fatalf("not lean: %+v", p.Stats())
	}
	// Code that imports the module: its kind starts the full server,
	// which takes 4 s.
	if res := run(t, p, envSpec(env, "import "+probeModule+"\nprint("+probeModule+".LOADED)\n")); string(res.Stdout) != "True\n" {
		t.Fatalf("stdout %q stderr %s", res.Stdout, res.Stderr)
	}
	start := time.Now()
	for range 5 {
		if res, ok := runForked(t, p, lean); !ok || string(res.Stdout) != "1\n" {
			t.Fatalf("lean %v stdout %q: %+v", ok, res.Stdout, p.Stats())
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("5 lean executions took %v while the full server started", d)
	}
}

// TestLeanCodeForksFromTheFullServerAtTheServerLimit: when --fork-servers
// leaves no room for a lean server, lean code forks from the full server
// that runs, as it did before there were lean servers, rather than getting
// warm jails built for it.
func TestLeanCodeForksFromTheFullServerAtTheServerLimit(t *testing.T) {
	p := newPool(t, Config{ForkServer: true, Preload: []string{probeModule}, MaxForkServers: 1})
	env := preloadEnv(t, "")
	full := envSpec(env, "import "+probeModule+"\nprint("+probeModule+".LOADED)\n")
	if res, _ := runForked(t, p, full); string(res.Stdout) != "True\n" {
		t.Fatalf("stdout %q stderr %s", res.Stdout, res.Stderr)
	}
	lean := envSpec(env, "print(1)\n")
	deadline := time.Now().Add(20 * time.Second)
	for {
		before := p.Stats().ForkedRuns
		if res := run(t, p, lean); string(res.Stdout) != "1\n" {
			t.Fatalf("stdout %q stderr %s", res.Stdout, res.Stderr)
		}
		if p.Stats().ForkedRuns > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lean code never forked with the full server running: %+v", p.Stats())
		}
	}
	if st := p.Stats(); st.Templates != 1 {
		t.Fatalf("want the one fork server the limit allows: %+v", st)
	}
}

// TestLeanServerMakesRoomForTheFullServer: when a lean server holds the
// last --fork-servers place, code that imports a preload still comes to
// fork: the lean server is ended once it runs nothing (an execution it
// runs meanwhile is not cut short), and lean code forks from the full
// server after.
func TestLeanServerMakesRoomForTheFullServer(t *testing.T) {
	p := newPool(t, Config{ForkServer: true, Preload: []string{probeModule}, MaxForkServers: 1})
	env := preloadEnv(t, "")
	lean := envSpec(env, "print(1)\n")
	if _, ok := runForked(t, p, lean); !ok {
		t.Fatalf("not lean: %+v", p.Stats())
	}
	type outcome struct {
		res sandbox.Result
		err error
	}
	slow := make(chan outcome, 1)
	go func() {
		res, err := p.Run(context.Background(), envSpec(env, "import time\ntime.sleep(3)\nprint('slept')\n"), nil)
		slow <- outcome{res, err}
	}()
	time.Sleep(time.Second) // it runs, forked from the lean server
	// Its kind wants the full server now, and the lean one is busy.
	full := envSpec(env, "import "+probeModule+"\nprint("+probeModule+".LOADED)\n")
	if res := run(t, p, full); string(res.Stdout) != "True\n" {
		t.Fatalf("stdout %q stderr %s", res.Stdout, res.Stderr)
	}
	if o := <-slow; o.err != nil || o.res.Status != sandbox.StatusOK || string(o.res.Stdout) != "slept\n" {
		t.Fatalf("the lean execution running meanwhile: err %v status %s (%s) stdout %q", o.err, o.res.Status, o.res.Reason, o.res.Stdout)
	}
	if res, _ := runForked(t, p, full); string(res.Stdout) != "True\n" {
		t.Fatalf("stdout %q stderr %s", res.Stdout, res.Stderr)
	}
	if res, isLean := runForked(t, p, lean); isLean || string(res.Stdout) != "1\n" {
		t.Fatalf("lean code after: lean %v stdout %q, want forked from the full server: %+v", isLean, res.Stdout, p.Stats())
	}
	if st := p.Stats(); st.Templates != 1 {
		t.Fatalf("want the full server alone: %+v", st)
	}
}
