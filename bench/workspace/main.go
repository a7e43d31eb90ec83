// Command workspace measures workspaces (internal/workspace) at the size
// issue 32 sets: a workspace of 10,000 files and 1 GiB. On one node it
// times the upload into the store, materialising a version for a run cold
// (no tree on the node: hard links from the blob cache) and warm (the
// tree is there), the overlay mount the jail will make, and the commit of
// a run's changes (the scan of its upper directory, one file changed and a
// thousand added) with the first mount of the version each commit made,
// and reports how much the store grows for a one-file
// change. With -fleet it does the same over an embedded NATS JetStream: a
// second node fetching the workspace cold, then only what one commit
// changed. It needs root (tmpfs and overlayfs mounts) and, on a shared
// machine, the jail tests' lock. It is a measurement tool, not a test.
//
//	flock /tmp/pyexec-jail-tests.lock go run ./bench/workspace -files 10000 -mib 1024
package main

import (
	"archive/tar"
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/store"
	"github.com/pyexec/pyexec/internal/workspace"
)

func main() {
	os.Exit(run())
}

var (
	ctx   = context.Background()
	alice = workspace.Caller{Name: "alice"}
	ref   = workspace.Ref{Name: "bench"}
	limit = workspace.UploadLimits{MaxFiles: 1 << 20, MaxFileBytes: 1 << 34, MaxTotalBytes: 1 << 36, MaxTarBytes: 1 << 36}
)

func run() int {
	files := flag.Int("files", 10_000, "files in the workspace")
	mib := flag.Int64("mib", 1024, "MiB in the workspace")
	rounds := flag.Int("rounds", 20, "rounds of the warm measurements")
	fleet := flag.Bool("fleet", true, "also measure two nodes over an embedded NATS JetStream")
	mounts := flag.Bool("mounts", true, "also measure what mounts: a run's tmpfs, the overlay, commits of runs")
	keep := flag.Bool("keep", false, "keep the temporary directory")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench/workspace: needs root (tmpfs and overlayfs mounts)")
		return 2
	}
	dir, err := os.MkdirTemp("", "pyexec-bench-workspace-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/workspace:", err)
		return 1
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	b := &bench{dir: dir, files: *files, bytes: *mib << 20, rounds: *rounds, mounts: *mounts}
	fmt.Printf("workspace of %d files, %d MiB; %d rounds; %d CPUs\n\n| measurement | value |\n|---|---:|\n", *files, *mib, *rounds, runtime.NumCPU())
	if err := b.local(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/workspace:", err)
		return 1
	}
	if *fleet {
		if err := b.fleet(); err != nil {
			fmt.Fprintln(os.Stderr, "bench/workspace:", err)
			return 1
		}
	}
	return 0
}

type bench struct {
	dir           string
	files, rounds int
	bytes         int64
	mounts        bool
}

func row(name, format string, args ...any) {
	fmt.Printf("| %s | %s |\n", name, fmt.Sprintf(format, args...))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func stats(ds []time.Duration) string {
	slices.Sort(ds)
	return fmt.Sprintf("p50 %s, max %s", ms(ds[len(ds)/2]), ms(ds[len(ds)-1]))
}

func config(dir string) workspace.Config {
	return workspace.Config{Dir: dir, Limits: workspace.Limits{MaxQuotaBytes: 64 << 30, DefaultQuotaBytes: 8 << 30}}
}

func (b *bench) local() error {
	root := filepath.Join(b.dir, "local")
	m, err := workspace.OpenLocal(config(root))
	if err != nil {
		return err
	}
	if _, err := m.Create(ctx, alice, ref.Name, 0); err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := m.Upload(ctx, alice, ref, "", b.tarball(), limit); err != nil {
		return err
	}
	up := time.Since(t0)
	row("upload (tar stream into the blob store, one commit)", "%s, %.0f MiB/s", ms(up), float64(b.bytes)/(1<<20)/up.Seconds())

	var cold, warm []time.Duration
	for range 3 {
		if err := removeTrees(filepath.Join(root, "trees")); err != nil {
			return err
		}
		d, mt, err := timedPrepare(m, workspace.ReadOnly, "cold")
		if err != nil {
			return err
		}
		cold = append(cold, d)
		if err := mt.Release(); err != nil {
			return err
		}
	}
	row("Prepare ro, cold (the tree built: a hard link per file from the cache)", "%s", stats(cold))
	for range b.rounds {
		d, mt, err := timedPrepare(m, workspace.ReadOnly, "warm")
		if err != nil {
			return err
		}
		warm = append(warm, d)
		if err := mt.Release(); err != nil {
			return err
		}
	}
	row("Prepare ro, warm (the tree is there)", "%s", stats(warm))

	blobs := filepath.Join(root, "blobs")
	before := dirBytes(blobs)
	t := time.Now()
	c, err := m.WriteFile(ctx, alice, ref, "d00/f00000", strings.NewReader(strings.Repeat("x", 4096)), 0, 1<<20)
	if err != nil {
		return err
	}
	row("WriteFile of one 4 KiB file (a version)", "%s; store +%d bytes", ms(time.Since(t)), dirBytes(blobs)-before)
	if c.Version != 2 {
		return fmt.Errorf("the write made version %d", c.Version)
	}
	t = time.Now()
	if err := m.Warm(ctx, alice, ref); err != nil {
		return err
	}
	row("Warm: the new version's tree, built after the commit", "%s", ms(time.Since(t)))
	if b.mounts {
		return b.runs(m, blobs)
	}
	return nil
}

// runs measures what needs mounts: a run's tmpfs, the overlay, commits of
// what runs changed.
func (b *bench) runs(m *workspace.Manager, blobs string) error {
	var warm, release, mounts []time.Duration
	for range b.rounds {
		d, mt, err := timedPrepare(m, workspace.ReadWrite, "warm")
		if err != nil {
			return err
		}
		warm = append(warm, d)
		md, err := inOverlay(mt, nothing)
		if err != nil {
			return err
		}
		mounts = append(mounts, md)
		t := time.Now()
		if err := mt.Release(); err != nil {
			return err
		}
		release = append(release, time.Since(t))
	}
	row("Prepare rw, warm (the tree is there; the run's tmpfs mounted)", "%s", stats(warm))
	row("overlay mount + unmount (private mount namespace)", "%s", stats(mounts))
	row("warm Prepare rw + overlay mount, p50", "%s", ms(warm[len(warm)/2]+mounts[len(mounts)/2]))
	row("Release (tmpfs unmount)", "%s", stats(release))
	for _, step := range []struct {
		name  string
		write func(merged string) error
	}{
		{"commit, nothing changed (scan of an empty upper)", nothing},
		{"commit, one file changed (4 KiB appended through the overlay)", appendOne},
		{"commit, 1,000 files of 4 KiB added", addMany(1000)},
	} {
		_, mt, err := timedPrepare(m, workspace.ReadWrite, "commit")
		if err != nil {
			return err
		}
		if _, err := inOverlay(mt, step.write); err != nil {
			return err
		}
		before := dirBytes(blobs)
		t := time.Now()
		c, err := mt.Commit(ctx)
		if err != nil {
			return err
		}
		d := time.Since(t)
		if err := mt.Release(); err != nil {
			return err
		}
		row(step.name, "%s; version %d, store +%d bytes", ms(d), c.Version, dirBytes(blobs)-before)
		// The agent's next run on this node: the first mount of the
		// version the commit made.
		st, err := m.Stats(ctx)
		if err != nil {
			return err
		}
		d, mt, err = timedPrepare(m, workspace.ReadWrite, "next")
		if err != nil {
			return err
		}
		if err := mt.Release(); err != nil {
			return err
		}
		st2, err := m.Stats(ctx)
		if err != nil {
			return err
		}
		row("  then the first Prepare rw of that version on this node", "%s; trees built %d (derived at the commit, so far: %d)",
			ms(d), st2.TreesBuilt-st.TreesBuilt, st2.TreesDerived)
	}
	return nil
}

func timedPrepare(m *workspace.Manager, mode workspace.Mode, run string) (time.Duration, *workspace.Mount, error) {
	t := time.Now()
	mt, err := m.Prepare(ctx, alice, ref, mode, run)
	return time.Since(t), mt, err
}

func (b *bench) fleet() error {
	emb, err := store.StartEmbedded(ctx, filepath.Join(b.dir, "nats"), nil)
	if err != nil {
		return err
	}
	defer emb.Close()
	fleetStore, err := store.Open(ctx, emb.Conn(), store.Config{})
	if err != nil {
		return err
	}
	n1, err := workspace.OpenFleet(ctx, fleetStore, config(filepath.Join(b.dir, "node1")))
	if err != nil {
		return err
	}
	n2, err := workspace.OpenFleet(ctx, fleetStore, config(filepath.Join(b.dir, "node2")))
	if err != nil {
		return err
	}
	if _, err := n1.Create(ctx, alice, ref.Name, 0); err != nil {
		return err
	}
	t := time.Now()
	if _, err := n1.Upload(ctx, alice, ref, "", b.tarball(), limit); err != nil {
		return err
	}
	up := time.Since(t)
	row("fleet: upload on node 1 (into the object store)", "%s, %.0f MiB/s", ms(up), float64(b.bytes)/(1<<20)/up.Seconds())
	d, mt, err := timedPrepare(n2, workspace.ReadOnly, "fleet-cold")
	if err != nil {
		return err
	}
	row("fleet: node 2 Prepare, cold cache (fetches everything)", "%s, %.0f MiB/s", ms(d), float64(b.bytes)/(1<<20)/d.Seconds())
	if err := mt.Release(); err != nil {
		return err
	}
	st, err := n1.Stats(ctx)
	if err != nil {
		return err
	}
	if _, err := n1.WriteFile(ctx, alice, ref, "d00/f00000", strings.NewReader(strings.Repeat("x", 4096)), 0, 1<<20); err != nil {
		return err
	}
	st2, err := n1.Stats(ctx)
	if err != nil {
		return err
	}
	row("fleet: store growth for a one-file change (4 KiB)", "%d bytes", st2.StoreBytes-st.StoreBytes)
	d, mt, err = timedPrepare(n2, workspace.ReadOnly, "fleet-next")
	if err != nil {
		return err
	}
	row("fleet: node 2 Prepare of the next version (fetches the change, builds the tree)", "%s", ms(d))
	if err := mt.Release(); err != nil {
		return err
	}
	d, mt, err = timedPrepare(n2, workspace.ReadOnly, "fleet-warm")
	if err != nil {
		return err
	}
	row("fleet: node 2 Prepare again (warm)", "%s", ms(d))
	return mt.Release()
}

// tarball streams the workspace's files: b.files files in 100 folders,
// sizes spread around the mean, pseudo-random content (no two alike).
func (b *bench) tarball() io.Reader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		mean := b.bytes / int64(b.files)
		buf := make([]byte, 2*mean+1)
		var err error
		for i := 0; i < b.files && err == nil; i++ {
			size := mean/2 + int64(i*7919)%(mean+1)
			rng := rand.NewChaCha8([32]byte{byte(i), byte(i >> 8), byte(i >> 16)})
			_, _ = rng.Read(buf[:size])
			hdr := &tar.Header{Name: fmt.Sprintf("d%02d/f%05d", i%100, i), Size: size, Mode: 0o644, ModTime: time.Unix(1700000000, 0)}
			if err = tw.WriteHeader(hdr); err == nil {
				_, err = tw.Write(buf[:size])
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// inOverlay mounts mt's overlay in a private mount namespace of a thread
// of its own, as the jail will, calls f with the merged directory, and
// returns how long the mount and the unmount took (f left out).
func inOverlay(mt *workspace.Mount, f func(merged string) error) (time.Duration, error) {
	target, err := os.MkdirTemp("", "pyexec-bench-merged-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(target)
	var took time.Duration
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread and its namespace end with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- err
			return
		}
		t := time.Now()
		if err := unix.Mount("overlay", target, "overlay", 0, mt.Jail().OverlayOptions()); err != nil {
			done <- fmt.Errorf("overlay: %w", err)
			return
		}
		took = time.Since(t)
		err := f(target)
		t = time.Now()
		if uerr := unix.Unmount(target, 0); err == nil {
			err = uerr
		}
		took += time.Since(t)
		done <- err
	}()
	err = <-done
	return took, err
}

func nothing(string) error { return nil }

func appendOne(merged string) error {
	f, err := os.OpenFile(filepath.Join(merged, "d07/f00007"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func addMany(n int) func(string) error {
	return func(merged string) error {
		if err := os.Mkdir(filepath.Join(merged, "new"), 0o755); err != nil {
			return err
		}
		buf := make([]byte, 4096)
		for i := range n {
			buf[0], buf[1] = byte(i), byte(i>>8)
			if err := os.WriteFile(filepath.Join(merged, "new", fmt.Sprint(i)), buf, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

func removeTrees(dir string) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(p, 0o700)
		}
		return err
	})
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return err
	})
	return n
}
