package pool

import (
	"os"
	"path/filepath"
	"testing"
)

// TestUntrustedMountsDoNotFork: an environment the operator did not choose
// (one a request's requirements built) gets no fork server, whose
// interpreter runs the environment's site hooks as root before any
// confinement: its .pth file runs as the sandbox user, in a warm jail.
// The same environment, trusted, forks (and the hook ran as root in the
// fork server: what the rule keeps from untrusted packages).
func TestUntrustedMountsDoNotFork(t *testing.T) {
	env := preloadEnv(t, "")
	sites, err := filepath.Glob(filepath.Join(env, "lib", "python3*", "site-packages"))
	if err != nil || len(sites) != 1 {
		t.Fatalf("the venv's site-packages: %v %v", sites, err)
	}
	hook := "import os, sys; sys.pyexec_hook_uid = os.getuid()\n"
	if err := os.WriteFile(filepath.Join(sites[0], "zz-hook.pth"), []byte(hook), 0o644); err != nil {
		t.Fatal(err)
	}
	code := "import sys\nprint(sys.pyexec_hook_uid)\n"

	untrusted := newPool(t, Config{ForkServer: true, TrustedMount: func(dir string) bool { return dir != env }})
	for range 3 {
		res := run(t, untrusted, envSpec(env, code))
		if string(res.Stdout) != "65534\n" {
			t.Fatalf("untrusted environment: the hook ran as uid %q, want the sandbox user's 65534 (stderr %s)", res.Stdout, res.Stderr)
		}
	}
	if st := untrusted.Stats(); st.ForkedRuns != 0 || st.Templates != 0 {
		t.Fatalf("an untrusted environment forked: %+v", st)
	}

	trusted := newPool(t, Config{ForkServer: true})
	if res, _ := runForked(t, trusted, envSpec(env, code)); string(res.Stdout) != "0\n" {
		t.Fatalf("trusted environment, forked: stdout %q, want the fork server's uid 0 (stderr %s)", res.Stdout, res.Stderr)
	}
}
