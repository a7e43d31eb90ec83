package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A persistent workspace reaches a cold or warm jail (mounted before the
// hand-off) through its slot; a fork refuses one. These tests stand
// in for internal/workspace with plain directories: a base tree owned by
// the sandbox user, and an upper and work directory.

// slotManager is needJail's Manager with workspace slots.
func slotManager(t *testing.T) *Manager {
	t.Helper()
	needJail(t) // skips without root; its manager is not used
	m, err := New(Config{CgroupParent: testParent, SpareCgroups: 2, WorkspaceSlots: filepath.Join(t.TempDir(), "slots")})
	if err != nil {
		t.Fatalf("sandbox.New: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
	})
	if err := m.Workspaces(); err != nil {
		t.Fatalf("Workspaces: %v", err)
	}
	return m
}

// testWorkspace makes a base tree holding base.txt, and (rw) an upper and
// a work directory, as the sandbox user owns them.
func testWorkspace(t *testing.T, ro bool) *WorkspaceMount {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := &WorkspaceMount{Lower: filepath.Join(dir, "lower"), ReadOnly: ro}
	dirs := []string{w.Lower}
	if !ro {
		w.Upper, w.Work = filepath.Join(dir, "upper"), filepath.Join(dir, "work")
		dirs = append(dirs, w.Upper, w.Work)
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(w.Lower, "base.txt"), []byte("from the base"), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

// wsProgram reads the base file, tries to write a file of its own and
// reports what it saw and which mounts of its namespace mention overlays.
const wsProgram = `import os
print(open("/workspace/base.txt").read())
try:
    with open("/workspace/new.txt", "w") as f:
        f.write(os.environ.get("TAG", "written"))
    print("write ok")
except OSError as e:
    print("write failed", e.errno)
print("overlays", sum(1 for l in open("/proc/self/mountinfo") if " overlay " in l))
`

// wsRunner runs code with w mounted, the way one kind of jail gets it.
type wsRunner func(t *testing.T, m *Manager, w *WorkspaceMount, code string, env ...string) Result

func coldWS(t *testing.T, m *Manager, w *WorkspaceMount, code string, env ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := m.Run(ctx, Spec{Argv: []string{python, "-c", code}, Env: append(testEnv, env...),
		Limits: Limits{WallTime: 20 * time.Second}, Workspace: w}, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func warmWS(t *testing.T, m *Manager, w *WorkspaceMount, code string, env ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	j, err := m.Prepare(ctx, Base{})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	defer j.Close()
	spec := Spec{Env: append(testEnv, env...), Limits: Limits{WallTime: 20 * time.Second}}
	p, err := j.Start(ctx, Spec{Argv: []string{python, "-c", silentWaiter}, Env: spec.Env, Requests: true,
		Limits: ceilingsFor(spec), Workspace: w}, nil)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return handOff(t, p, spec, code)
}

// forkedWS runs code in an execution forked from tpl (without a
// workspace: a fork refuses one).
func forkedWS(tpl *Template) wsRunner {
	return func(t *testing.T, m *Manager, w *WorkspaceMount, code string, env ...string) Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		spec := Spec{Env: append(testEnv, env...), Limits: Limits{WallTime: 20 * time.Second}}
		j, p, err := tpl.Fork(ctx, Spec{Argv: []string{python}, Env: spec.Env, Requests: true,
			Limits: ceilingsFor(spec), Workspace: w}, nil)
		if err != nil {
			t.Fatalf("Fork: %v", err)
		}
		defer j.Close()
		return handOff(t, p, spec, code)
	}
}

func TestWorkspaceMountInEveryJail(t *testing.T) {
	m := slotManager(t)
	kinds := []struct {
		name string
		run  wsRunner
	}{{"cold", coldWS}, {"warm", warmWS}}
	for _, k := range kinds {
		for _, ro := range []bool{false, true} {
			name := k.name + "/rw"
			if ro {
				name = k.name + "/ro"
			}
			t.Run(name, func(t *testing.T) {
				w := testWorkspace(t, ro)
				res := k.run(t, m, w, wsProgram)
				out := string(res.Stdout)
				if res.Status != StatusOK || !strings.Contains(out, "from the base") {
					t.Fatalf("status %s (%s), stdout %q, stderr %q", res.Status, res.Reason, out, res.Stderr)
				}
				if ro {
					if !strings.Contains(out, "write failed 30") { // EROFS
						t.Errorf("a read-only workspace took a write: %q", out)
					}
				} else {
					if !strings.Contains(out, "write ok") || !strings.Contains(out, "overlays 1\n") {
						t.Errorf("stdout %q: want the write to succeed in one overlay", out)
					}
					if b, err := os.ReadFile(filepath.Join(w.Upper, "new.txt")); err != nil || string(b) != "written" {
						t.Errorf("the upper directory holds %q, %v; want the run's file", b, err)
					}
				}
				if _, err := os.Stat(filepath.Join(w.Lower, "new.txt")); err == nil {
					t.Error("the base tree was written")
				}
				if n := overlaysOnHost(t, m); n != 0 {
					t.Errorf("%d workspace mounts left on the host after the run", n)
				}
			})
		}
	}
}

// A fork refuses a workspace before anything is mounted or started: a
// fork server's /workspace would show every sibling's, so a run with one
// takes a jail of its own (the pool and sessions never fork one).
func TestForkRefusesAWorkspace(t *testing.T) {
	m := slotManager(t)
	tpl := startTemplate(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ro := range []bool{false, true} {
		j, _, err := tpl.Fork(ctx, Spec{Argv: []string{python}, Env: testEnv, Requests: true,
			Workspace: testWorkspace(t, ro)}, nil)
		if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), "no workspace") {
			if j != nil {
				j.Close()
			}
			t.Fatalf("Fork with a workspace (ro %v): %v; want ErrInvalidSpec", ro, err)
		}
	}
	if n := overlaysOnHost(t, m); n != 0 {
		t.Errorf("%d workspace mounts on the host after the refused forks", n)
	}
	// The fork server still serves executions without one.
	if res := forkedWS(tpl)(t, m, nil, "print('forked')"); string(res.Stdout) != "forked\n" {
		t.Errorf("a fork after the refusals: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
}

// overlaysOnHost counts the mounts below m's slots.
func overlaysOnHost(t *testing.T, m *Manager) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], m.slots+"/") {
			n++
		}
	}
	return n
}

// A jail without a slot, or a server without them, fails closed.
func TestWorkspaceWithoutSlotsFailsClosed(t *testing.T) {
	m := needJail(t)
	if err := m.Workspaces(); err == nil || !strings.Contains(err.Error(), "not enabled") {
		t.Fatalf("Workspaces() = %v; want not enabled", err)
	}
	res, err := m.Run(context.Background(), Spec{Argv: []string{python, "-c", "print('ran')"}, Env: testEnv,
		Workspace: testWorkspace(t, true)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusSetupError || !strings.Contains(res.Reason, "not enabled") || len(res.Stdout) > 0 {
		t.Fatalf("status %s reason %q stdout %q: want a setup error before the payload ran", res.Status, res.Reason, res.Stdout)
	}
}

func TestWorkspaceMountValidate(t *testing.T) {
	cases := map[string]WorkspaceMount{
		"relative lower":   {Lower: "tree", ReadOnly: true},
		"comma in upper":   {Lower: "/t", Upper: "/u,lowerdir=/etc", Work: "/w"},
		"colon in lower":   {Lower: "/t:/etc", Upper: "/u", Work: "/w"},
		"unclean work":     {Lower: "/t", Upper: "/u", Work: "/w/../x"},
		"ro with an upper": {Lower: "/t", Upper: "/u", ReadOnly: true},
		"rw without upper": {Lower: "/t"},
	}
	for name, w := range cases {
		t.Run(name, func(t *testing.T) {
			s := Spec{Argv: []string{python}, Workspace: &w}
			if err := s.Validate(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// While one execution has a workspace mounted, jails of every kind without
// one see an empty, read-only /workspace, no overlay, and none of the
// workspace's host directories.
func TestWorkspaceNotReachableFromOtherJails(t *testing.T) {
	m := slotManager(t)
	tpl := startTemplate(t, m)
	w := testWorkspace(t, false)
	holder := make(chan Result, 1)
	go func() {
		holder <- coldWS(t, m, w, `import time
open("/workspace/secret.txt", "w").write("secret")
time.sleep(3)
`)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for overlaysOnHost(t, m) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the holder's workspace was never mounted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	probe := fmt.Sprintf(`import os
print(os.listdir("/workspace"))
print(sum(1 for l in open("/proc/self/mountinfo") if " overlay " in l))
for p in (%q, %q, %q):
    print(os.path.exists(p))
try:
    open("/workspace/x", "w")
    print("wrote")
except OSError as e:
    print("refused", e.errno)
`, filepath.Join(w.Upper, "secret.txt"), filepath.Join(w.Lower, "base.txt"), m.slots)
	want := "[]\n0\nFalse\nFalse\nFalse\nrefused 30\n"
	kinds := []struct {
		name string
		run  wsRunner
	}{{"cold", coldWS}, {"warm", warmWS}, {"forked", forkedWS(tpl)}}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			res := k.run(t, m, nil, probe)
			if got := string(res.Stdout); got != want {
				t.Errorf("stdout %q (stderr %q, %s), want %q", got, res.Stderr, res.Reason, want)
			}
		})
	}
	if res := <-holder; res.Status != StatusOK {
		t.Fatalf("holder: %s %s %s", res.Status, res.Reason, res.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(w.Upper, "secret.txt")); err != nil || string(b) != "secret" {
		t.Fatalf("the holder's file: %q, %v", b, err)
	}
}

// A server killed without its cleanup (SIGKILL) leaves its slots mount,
// and the workspaces mounted on its jails' slots, in the host's mount
// table. The next server on the same directory detaches them, says so in
// its log, and starts with empty slots; closing it leaves nothing mounted.
func TestSlotsSweepAKilledPredecessorsMounts(t *testing.T) {
	needJail(t)
	dir := filepath.Join(t.TempDir(), "slots")
	slot := filepath.Join(dir, "jail-of-the-dead-server")
	// What the dead server left: its slots mount (a shared bind of the
	// directory) and a workspace on one of its slots.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		src   string
		flags uintptr
	}{{dir, unix.MS_BIND}, {"", unix.MS_PRIVATE}, {"", unix.MS_SHARED}} {
		if err := unix.Mount(s.src, dir, "", s.flags, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(slot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", slot, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	m, err := New(Config{CgroupParent: testParent, WorkspaceSlots: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
		t.Fatalf("sandbox.New over a killed server's slots: %v", err)
	}
	if mounted := mountsBelow(t, dir); len(mounted) != 1 || mounted[0] != dir {
		t.Errorf("mounts at and below the slots after the start: %q; want only the new server's own", mounted)
	}
	if _, err := os.Stat(slot); !os.IsNotExist(err) {
		t.Errorf("the dead server's slot is still there: %v", err)
	}
	if !strings.Contains(logs.String(), "detached the workspace slots a previous server left mounted") {
		t.Errorf("the sweep is not logged:\n%s", logs.String())
	}
	if err := m.Close(); err != nil {
		t.Errorf("Manager.Close: %v", err)
	}
	if mounted := mountsBelow(t, dir); len(mounted) > 0 {
		t.Errorf("mounted after Close: %q", mounted)
	}
}

// mountsBelow lists this process's mount points at or below dir (paths
// without spaces or other escaped characters).
func mountsBelow(t *testing.T, dir string) []string {
	t.Helper()
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(info), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}
