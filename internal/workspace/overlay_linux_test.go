package workspace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Tests that mount: a run's tmpfs in the test's mount namespace (the
// server's, in production) and, standing in for the jail, the overlay in
// a private mount namespace of a thread of its own, where a shell runs as
// the sandbox user. They need root and run under the jail tests' lock.

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount tmpfs and overlayfs")
	}
}

// prepare prepares ref for run and releases it when the test ends.
func prepare(t *testing.T, m *Manager, c Caller, ref Ref, mode Mode, run string) *Mount {
	t.Helper()
	mt, err := m.Prepare(context.Background(), c, ref, mode, run)
	if err != nil {
		t.Fatalf("prepare %s: %v", run, err)
	}
	t.Cleanup(func() {
		if err := mt.Release(); err != nil {
			t.Errorf("release %s: %v", run, err)
		}
		if isMountPoint(m.dirs.runs + "/" + run) {
			t.Errorf("run %s: tmpfs still mounted after Release", run)
		}
	})
	return mt
}

// runResult is what a shell run in the workspace printed and how it ended.
type runResult struct {
	out string
	err error
}

// runIn mounts mt at a fresh directory as the jail would (overlay, or a
// read-only bind for a read-only mount), in a mount namespace that exists
// only for this call, and runs script there with sh as the sandbox user.
// kill, when positive, SIGKILLs the shell's process group after that long.
func runIn(t *testing.T, mt *Mount, script string, kill time.Duration) runResult {
	t.Helper()
	// Not under t.TempDir, whose parent only root may enter: the shell
	// runs as the sandbox user in the merged directory.
	target, err := os.MkdirTemp("", "pyexec-workspace-merged-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(target)
	if err := os.Chmod(target, 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan runResult, 1)
	go func() {
		// The thread unshares its mount namespace and is never given back
		// to the scheduler: it ends with this goroutine, and the
		// namespace with the shell it started.
		runtime.LockOSThread()
		fail := func(err error) { done <- runResult{err: err} }
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			fail(err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			fail(err)
			return
		}
		var err error
		if mt.ReadOnly {
			if err = unix.Mount(mt.Lower, target, "", unix.MS_BIND, ""); err == nil {
				err = unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
			}
		} else {
			err = unix.Mount("overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, mt.Jail().OverlayOptions())
		}
		if err != nil {
			fail(err)
			return
		}
		var out bytes.Buffer
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir, cmd.Stdout, cmd.Stderr = target, &out, &out
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, Setpgid: true}
		if err := cmd.Start(); err != nil {
			fail(err)
			return
		}
		if kill > 0 {
			timer := time.AfterFunc(kill, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
			defer timer.Stop()
		}
		err = cmd.Wait()
		done <- runResult{out: out.String(), err: err}
	}()
	return <-done
}

func mustRun(t *testing.T, mt *Mount, script string) string {
	t.Helper()
	r := runIn(t, mt, script, 0)
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.out)
	}
	return r.out
}

func mustCommit(t *testing.T, mt *Mount) Commit {
	t.Helper()
	c, err := mt.Commit(context.Background())
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	return c
}

func refusedPaths(c Commit) map[string]string {
	out := map[string]string{}
	for _, r := range c.Refused {
		out[r.Path] = r.Reason
	}
	return out
}

// What a run does in /workspace — change, add, delete, rename, replace a
// folder, chmod, links — becomes the next version; what may not be kept
// is refused by name.
func TestRunChangesBecomeAVersion(t *testing.T) {
	requireRoot(t)
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 64<<20)
	upload(t, m, ref, map[string]string{
		"a.txt": "alpha\n", "d/x": "x", "d/y": "y", "keep/old1": "1", "keep/sub/old2": "2", "bin/tool": "#!/bin/sh\necho tool\n",
	})
	mt := prepare(t, m, alice, ref, ReadWrite, "run1")
	if mt.Base != 1 || mt.Room != 64<<20-int64(len("alpha\nxy12#!/bin/sh\necho tool\n")) {
		t.Errorf("mount base %d room %d", mt.Base, mt.Room)
	}
	out := mustRun(t, mt, `set -e
		id -u
		cat a.txt
		echo beta >> a.txt
		mkdir -p new/deep && printf fresh > new/deep/file
		rm d/x
		mv d/y d/y2
		rm -r keep && mkdir keep && printf again > keep/fresh
		chmod 700 bin/tool
		ln -s ../a.txt new/link
		ln -s /etc/passwd evil
		ln -s ../../../etc/shadow d/evil2
		mkfifo pipe
		truncate -s 1T sparse
		`)
	if !strings.HasPrefix(out, "65534\nalpha\n") {
		t.Errorf("run output %q", out)
	}
	c := mustCommit(t, mt)
	if c.Version != 2 || c.Base != 1 || len(c.Conflicts) != 0 {
		t.Errorf("commit %+v", c)
	}
	want := map[string]string{
		"a.txt": "alpha\nbeta\n", "d": "/", "d/y2": "y", "keep": "/", "keep/fresh": "again",
		"bin": "/", "bin/tool": "#!/bin/sh\necho tool\n", "new": "/", "new/deep": "/", "new/deep/file": "fresh",
		"new/link": "->../a.txt",
	}
	got := files(t, m, alice, ref, Head)
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %q, want %q", p, got[p], w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected %s (%q)", p, got[p])
		}
	}
	refused := refusedPaths(c)
	for _, p := range []string{"evil", "d/evil2", "pipe", "sparse"} {
		if refused[p] == "" {
			t.Errorf("%s not refused (refused: %v)", p, refused)
		}
	}
	list, _ := m.Files(ctx, alice, ref, Head, "bin")
	if len(list) != 1 || list[0].Mode != 0o700 {
		t.Errorf("bin/tool after chmod: %+v", list)
	}
	// The next run sees the new version, from a tree built for it.
	mt2 := prepare(t, m, alice, ref, ReadWrite, "run2")
	if mt2.Base != 2 || mt2.Lower == mt.Lower {
		t.Errorf("second mount base %d lower %s", mt2.Base, mt2.Lower)
	}
	if out := mustRun(t, mt2, `cat a.txt keep/fresh; ls d; readlink new/link; ./bin/tool`); out != "alpha\nbeta\nagainy2\n../a.txt\ntool\n" {
		t.Errorf("second run read %q", out)
	}
	if c := mustCommit(t, mt2); c.Changed || c.Version != 2 {
		t.Errorf("a run that changed nothing committed %+v", c)
	}
}

// upload puts files into a workspace as one version.
func upload(t *testing.T, m *Manager, ref Ref, files map[string]string) {
	t.Helper()
	var entries []tarEntry
	for p, body := range files {
		entries = append(entries, tarEntry{name: p, body: body, mode: 0o755})
	}
	if _, err := m.Upload(ctx, alice, ref, "", bytes.NewReader(makeTar(t, entries...)), bigLimits); err != nil {
		t.Fatal(err)
	}
}

// A read-only mount is the version's tree, readable by the sandbox user
// and not writable.
func TestReadOnlyMount(t *testing.T) {
	requireRoot(t)
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 0)
	upload(t, m, ref, map[string]string{"data/in.csv": "1,2\n"})
	mt := prepare(t, m, alice, ref, ReadOnly, "ro1")
	if mt.Upper != "" || mt.Work != "" {
		t.Errorf("read-only mount has upper %q work %q", mt.Upper, mt.Work)
	}
	r := runIn(t, mt, `cat data/in.csv; echo x > data/out.csv`, 0)
	if r.err == nil || !strings.Contains(r.out, "1,2") || !strings.Contains(r.out, "Read-only file system") {
		t.Errorf("run: %v\n%s", r.err, r.out)
	}
	if c := mustCommit(t, mt); c.Changed || c.Version != 1 {
		t.Errorf("read-only commit %+v", c)
	}
}

// Writing beyond the quota fails inside the run with ENOSPC, and the
// version keeps what fit.
func TestRunSeesENOSPCAtTheQuota(t *testing.T) {
	requireRoot(t)
	m := newLocal(t, Limits{KeyQuotaBytes: 3 << 20})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 2<<20)
	mustWrite(t, m, alice, ref, "existing", strings.Repeat("e", 512<<10))
	mt := prepare(t, m, alice, ref, ReadWrite, "q1")
	if mt.Room != 2<<20-512<<10 {
		t.Errorf("room %d", mt.Room)
	}
	r := runIn(t, mt, `printf small > small; dd if=/dev/zero of=big bs=64k count=100 2>&1; echo "dd=$?"`, 0)
	if !strings.Contains(r.out, "No space left on device") || strings.Contains(r.out, "dd=0") {
		t.Errorf("the run did not see ENOSPC: %v\n%s", r.err, r.out)
	}
	c := mustCommit(t, mt)
	info, _ := m.Get(ctx, alice, ref)
	got := files(t, m, alice, ref, Head)
	if got["small"] != "small" || len(got["big"]) == 0 || info.Bytes > 2<<20 {
		t.Errorf("kept small %q, big of %d bytes; workspace %d bytes (commit %+v)", got["small"], len(got["big"]), info.Bytes, c)
	}
	t.Logf("room %d: the run wrote %d bytes of big before ENOSPC; the workspace holds %d of %d", mt.Room, len(got["big"]), info.Bytes, 2<<20)
	// The key's quota bounds a second workspace's room.
	mustCreate(t, m, alice, "v", 2<<20)
	mt2 := prepare(t, m, alice, Ref{Name: "v"}, ReadWrite, "q2")
	if want := min(2<<20, int64(3<<20)-info.Bytes); mt2.Room != want {
		t.Errorf("room under the key quota %d, want %d", mt2.Room, want)
	}
}

// A run killed while writing leaves the workspace at a consistent
// version: the files as they were when it died, every write whole, and
// nothing of the base lost.
func TestRunKilledMidWrite(t *testing.T) {
	requireRoot(t)
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 0)
	upload(t, m, ref, map[string]string{"base.txt": "base"})
	mt := prepare(t, m, alice, ref, ReadWrite, "k1")
	line := strings.Repeat("L", 99) + "\n"
	r := runIn(t, mt, `rm base.txt; while :; do printf '`+strings.TrimSuffix(line, "\n")+`\n' >> log; done`, 300*time.Millisecond)
	var exit *exec.ExitError
	if !errors.As(r.err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the run was not killed: %v", r.err)
	}
	c := mustCommit(t, mt)
	got := files(t, m, alice, ref, Head)
	log := got["log"]
	if c.Version != 2 || len(log) == 0 || len(log)%len(line) != 0 || strings.Trim(log, line) != "" {
		t.Errorf("commit %+v; log of %d bytes (whole lines of %d)", c, len(log), len(line))
	}
	if _, ok := got["base.txt"]; ok {
		t.Error("the deletion before the kill was not kept")
	}
	t.Logf("killed after %d lines", len(log)/len(line))
}

// 20 runs started from the same version, each adding its own file, all
// land; runs that change the same file are told, and nothing is lost.
func TestConcurrentRuns(t *testing.T) {
	requireRoot(t)
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 0)
	upload(t, m, ref, map[string]string{"out/.keep": "", "shared.txt": "base\n"})
	const n = 20
	mounts := make([]*Mount, n)
	for i := range n {
		mounts[i] = prepare(t, m, alice, ref, ReadWrite, "c"+string(rune('a'+i)))
	}
	for i, mt := range mounts {
		script := `echo "run ` + string(rune('a'+i)) + `" > out/` + string(rune('a'+i)) + `.txt`
		if i < 3 {
			script += `; echo "run ` + string(rune('a'+i)) + `" >> shared.txt`
		}
		mustRun(t, mt, script)
	}
	commits := make([]Commit, n)
	errs := make([]error, n)
	done := make(chan int)
	for i, mt := range mounts {
		go func() {
			commits[i], errs[i] = mt.Commit(ctx)
			done <- i
		}()
	}
	for range n {
		<-done
	}
	got := files(t, m, alice, ref, Head)
	var conflicts []Conflict
	for i := range n {
		name := string(rune('a' + i))
		if errs[i] != nil {
			t.Fatalf("commit %s: %v", name, errs[i])
		}
		if got["out/"+name+".txt"] != "run "+name+"\n" {
			t.Errorf("run %s's file: %q", name, got["out/"+name+".txt"])
		}
		conflicts = append(conflicts, commits[i].Conflicts...)
	}
	if info, _ := m.Get(ctx, alice, ref); info.Version != 1+n {
		t.Errorf("version %d after %d commits", info.Version, n)
	}
	if len(conflicts) != 2 {
		t.Fatalf("conflicts %+v, want 2", conflicts)
	}
	seen := map[string]bool{got["shared.txt"]: true}
	for _, c := range conflicts {
		if c.Path != "shared.txt" || c.KeptAs == "" {
			t.Errorf("conflict %+v", c)
		}
		seen[got[c.KeptAs]] = true
	}
	for i := range 3 {
		if want := "base\nrun " + string(rune('a'+i)) + "\n"; !seen[want] {
			t.Errorf("run %d's shared.txt (%q) is nowhere", i, want)
		}
	}
}

// What a run plants in its upper directory to reach the host — devices,
// sockets, links out, names no path can hold, a terabyte of holes — is
// refused by name, and nothing outside the workspace is read.
func TestCommitRefusesHostileUpper(t *testing.T) {
	requireRoot(t)
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 1<<20)
	mustWrite(t, m, alice, ref, "keep", "kept")
	mt := prepare(t, m, alice, ref, ReadWrite, "h1")
	up := mt.Upper
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(unix.Mknod(up+"/mem", unix.S_IFCHR|0o666, int(unix.Mkdev(1, 1))))
	must(unix.Mknod(up+"/disk", unix.S_IFBLK|0o666, int(unix.Mkdev(8, 0))))
	must(unix.Mkfifo(up+"/fifo", 0o666))
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	must(err)
	must(unix.Bind(sock, &unix.SockaddrUnix{Name: up + "/sock"}))
	unix.Close(sock)
	must(os.Symlink("/etc/passwd", up+"/abs"))
	must(os.Symlink("../../../../../../etc/passwd", up+"/rel"))
	must(os.WriteFile(up+"/bad\xffname", []byte("x"), 0o644))
	must(os.WriteFile(up+"/line\nbreak", []byte("ok"), 0o644))
	deep := up
	for range 70 {
		deep += "/d"
	}
	must(os.MkdirAll(deep, 0o755))
	must(os.WriteFile(deep+"/bottom", []byte("deep"), 0o644))
	f, err := os.Create(up + "/holes")
	must(err)
	must(f.Truncate(1 << 40))
	f.Close()
	must(os.WriteFile(up+"/fits", []byte("ok"), 0o644))
	c := mustCommit(t, mt)
	refused := refusedPaths(c)
	for _, p := range []string{"mem", "disk", "fifo", "sock", "abs", "rel", "bad\uFFFDname", "holes"} {
		if refused[p] == "" {
			t.Errorf("%q not refused", p)
		}
	}
	deepRefused := false
	for p := range refused {
		deepRefused = deepRefused || strings.HasPrefix(p, "d/d/d/")
	}
	if !deepRefused {
		t.Errorf("the 70-deep path was not refused: %v", refused)
	}
	got := files(t, m, alice, ref, Head)
	if got["keep"] != "kept" || got["fits"] != "ok" || got["line\nbreak"] != "ok" {
		t.Errorf("kept %v", got)
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	if m.cache.has(fileHash(alice.Name, passwd)) {
		t.Error("/etc/passwd was read into the store")
	}
	t.Logf("refused: %v", refused)
}

// A server that stopped between a run and its commit commits the run's
// changes when it starts again.
func TestRecoverCommitsLeftRuns(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	uid, gid := sandboxIDs()
	m1, err := OpenLocal(Config{Dir: dir, UID: uid, GID: gid})
	if err != nil {
		t.Fatal(err)
	}
	ref := Ref{Name: "w"}
	mustCreate(t, m1, alice, "w", 0)
	mt, err := m1.Prepare(ctx, alice, ref, ReadWrite, "lost")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmountTmpfs(dir + "/runs/lost") }) // if the test fails before Recover
	mustRun(t, mt, `echo survived > result.txt`)
	// m1 is gone without Commit or Release, its tmpfs still mounted.
	m2, err := OpenLocal(Config{Dir: dir, UID: uid, GID: gid})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := m2.Recover(ctx)
	if err != nil || len(rec) != 1 || rec[0].Err != nil || rec[0].Commit.Version != 1 || rec[0].Run != "lost" {
		t.Fatalf("recover: %+v, %v", rec, err)
	}
	if got := readFile(t, m2, alice, ref, Head, "result.txt"); got != "survived\n" {
		t.Errorf("recovered %q", got)
	}
	if isMountPoint(dir + "/runs/lost") {
		t.Error("the recovered run's tmpfs is still mounted")
	}
	if _, err := os.Stat(dir + "/runs/lost.json"); !os.IsNotExist(err) {
		t.Errorf("state file: %v", err)
	}
	vs, _ := m2.Versions(ctx, alice, ref)
	if vs[len(vs)-1].Source != "recovered run lost" {
		t.Errorf("version source %q", vs[len(vs)-1].Source)
	}
}

// A run that chains links, each inside on its own text, to climb out of
// the workspace gets those links refused by name at commit; the link they
// went through, which stays inside, is kept.
func TestRunChainedLinksRefused(t *testing.T) {
	requireRoot(t)
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 1<<20)
	mt := prepare(t, m, alice, ref, ReadWrite, "chained")
	mustRun(t, mt, `mkdir -p a/b/c && ln -s ../../.. a/b/c/up && ln -s a/b/c/up/../../../etc x && ln -s a/b/c/up/.. y && ln -s a/b/c/up/a z`)
	c := mustCommit(t, mt)
	refused := refusedPaths(c)
	for _, p := range []string{"x", "y"} {
		if !strings.Contains(refused[p], "out of the workspace") {
			t.Errorf("%s not refused: %v", p, c.Refused)
		}
	}
	got := files(t, m, alice, ref, Head)
	if _, ok := got["x"]; ok {
		t.Errorf("x kept: %v", got)
	}
	if _, ok := got["y"]; ok {
		t.Errorf("y kept: %v", got)
	}
	if got["a/b/c/up"] != "->../../.." || got["z"] != "->a/b/c/up/a" {
		t.Errorf("links inside: up %q, z %q", got["a/b/c/up"], got["z"])
	}
}

// Overlay markers a run forges as user.overlay.* attributes are ordinary
// attributes to this overlay: the commit keeps what the run saw. And group
// or world write bits a run sets are not kept.
func TestRunCannotForgeOverlayMarkers(t *testing.T) {
	requireRoot(t)
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 1<<20)
	mustWrite(t, m, alice, ref, "data/a", "A")
	mustWrite(t, m, alice, ref, "data/b", "B")
	mt := prepare(t, m, alice, ref, ReadWrite, "forge")
	mustRun(t, mt, `/usr/bin/python3 -c "
import os
os.setxattr('data', 'user.overlay.opaque', b'y')
open('ghost','w').close(); os.setxattr('ghost', 'user.overlay.whiteout', b'')
open('open','w').write('o'); os.chmod('open', 0o777); os.mkdir('shared'); os.chmod('shared', 0o777)
"`)
	c := mustCommit(t, mt)
	got := files(t, m, alice, ref, Head)
	if got["data/a"] != "A" || got["data/b"] != "B" {
		t.Errorf("a forged opaque marker dropped what the run saw: %v", got)
	}
	if _, ok := got["ghost"]; !ok {
		t.Errorf("a forged whiteout dropped the run's file ghost: %v (commit %+v)", got, c)
	}
	list, err := m.Files(ctx, alice, ref, Head, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range list {
		if (f.Path == "open" || f.Path == "shared") && f.Mode.Perm() != 0o755 {
			t.Errorf("%s kept mode %v, want 0755", f.Path, f.Mode.Perm())
		}
	}
}
