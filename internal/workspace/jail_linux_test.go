package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Workspaces in real jails: what a run of a key writes, the key's next run
// reads; another key cannot mount it, and a run reaches nothing of it but
// its /workspace. Root only, under the jail tests' lock.

const jailPython = "/usr/bin/python3"

func jailManager(t *testing.T) *sandbox.Manager {
	t.Helper()
	requireRoot(t)
	if _, err := os.Stat(jailPython); err != nil {
		t.Skipf("needs %s: %v", jailPython, err)
	}
	sb, err := sandbox.New(sandbox.Config{CgroupParent: testCgroupParent,
		WorkspaceSlots: filepath.Join(t.TempDir(), "slots")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("sandbox Close: %v", err)
		}
	})
	if err := sb.Workspaces(); err != nil {
		t.Fatal(err)
	}
	return sb
}

// jailRun runs code in a cold jail with ref mounted for c, commits what it
// left and releases the mount, as the engine does.
func jailRun(t *testing.T, m *Manager, sb *sandbox.Manager, c Caller, ref Ref, mode Mode, run, code string) (string, Commit) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mt, err := m.Prepare(ctx, c, ref, mode, run)
	if err != nil {
		t.Fatalf("Prepare %s: %v", run, err)
	}
	defer func() {
		if err := mt.Release(); err != nil {
			t.Errorf("Release %s: %v", run, err)
		}
	}()
	res, err := sb.Run(ctx, sandbox.Spec{Argv: []string{jailPython, "-c", code},
		Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, Limits: sandbox.Limits{WallTime: 20 * time.Second},
		Workspace: mt.Jail()}, nil)
	if err != nil {
		t.Fatalf("Run %s: %v", run, err)
	}
	if res.Status != sandbox.StatusOK {
		t.Fatalf("run %s: %s %s, stderr %q", run, res.Status, res.Reason, res.Stderr)
	}
	cm, err := mt.Commit(ctx)
	if err != nil {
		t.Fatalf("Commit %s: %v", run, err)
	}
	return string(res.Stdout), cm
}

func TestJailRunsShareTheirKeysWorkspace(t *testing.T) {
	sb := jailManager(t)
	m := newLocal(t, Limits{})
	mustCreate(t, m, alice, "data", 0)
	mustCreate(t, m, bob, "data", 0) // the same name, bob's own
	w := Ref{Name: "data"}
	payload := strings.Repeat("line of alice\n", 1000) + "\x00\xff end"

	_, cm := jailRun(t, m, sb, alice, w, ReadWrite, "r1", fmt.Sprintf(`
import os
os.makedirs("/workspace/out", exist_ok=True)
with open("/workspace/out/notes.bin", "wb") as f:
    f.write(%q.encode("latin-1"))
`, payload))
	if !cm.Changed || cm.Version != 1 || cm.Added == 0 {
		t.Fatalf("first run's commit %+v, want version 1 with the file", cm)
	}

	// Alice's next run reads it byte for byte, read-only as well as read-write.
	for _, mode := range []Mode{ReadOnly, ReadWrite} {
		out, cm := jailRun(t, m, sb, alice, w, mode, fmt.Sprintf("r2-%s", mode), `
import sys
sys.stdout.buffer.write(open("/workspace/out/notes.bin", "rb").read())
`)
		if out != payload {
			t.Fatalf("mode %v: the next run read %d bytes, want the %d written", mode, len(out), len(payload))
		}
		if cm.Changed {
			t.Errorf("mode %v: a run that only read made version %d", mode, cm.Version)
		}
	}

	// Bob cannot mount alice's workspace by naming her, and his own "data"
	// does not hold her file.
	if _, err := m.Prepare(context.Background(), bob, Ref{Owner: "alice", Name: "data"}, ReadOnly, "b1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob's Prepare of alice's workspace: %v, want ErrNotFound", err)
	}
	out, _ := jailRun(t, m, sb, bob, w, ReadWrite, "b2", `
import os
print(sorted(os.listdir("/workspace")))
`)
	if out != "[]\n" {
		t.Fatalf("bob's data holds %q, want nothing", out)
	}

	// A run reaches nothing of the workspace but its /workspace: not the
	// host's trees, blobs or records, and not another run's upper
	// directory while that run is going.
	probe := fmt.Sprintf(`
import os
for p in (%q, %q, %q):
    print(os.path.exists(p))
`, m.dirs.root, filepath.Join(m.dirs.runs, "r1"), "/proc/1/root"+m.dirs.root)
	out, _ = jailRun(t, m, sb, bob, w, ReadOnly, "b3", probe)
	if out != "False\nFalse\nFalse\n" {
		t.Fatalf("a run sees the host's workspace directories: %q", out)
	}
	if got := readFile(t, m, alice, w, Head, "out/notes.bin"); got != payload {
		t.Fatalf("alice's file after bob's runs: %d bytes", len(got))
	}
}
