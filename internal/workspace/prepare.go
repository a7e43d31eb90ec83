package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Handing a workspace to a run. Prepare gives the jail what it mounts at
// /workspace:
//
//	lower  trees/<root>       the base version, read-only, shared by every run on it
//	upper  runs/<run>/upper   this run's changes (copy-up on write, whiteouts for deletions)
//	work   runs/<run>/work    overlayfs's own scratch directory
//
// runs/<run> is a tmpfs of the room the quotas leave, so a write beyond
// them fails inside the run with ENOSPC. When the run ends — however it
// ends — the engine calls Commit, which scans the upper directory into a
// change set against the base and commits it, then Release, which
// unmounts the tmpfs. A read-only mount is the lower tree alone.
//
// runs/<run>.json records what a Commit needs, so that a server that
// stopped between the end of a run and its commit commits it when it
// starts again (Recover) — as long as the tmpfs is still mounted.

// Mode is how a run mounts a workspace.
type Mode string

// Modes of a mount.
const (
	ReadWrite Mode = "rw"
	ReadOnly  Mode = "ro"
)

// ParseMode reads a workspace_mode: "", "rw" or "ro".
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", ReadWrite:
		return ReadWrite, nil
	case ReadOnly:
		return ReadOnly, nil
	}
	return "", fmt.Errorf("%w: workspace mode %s: \"rw\" or \"ro\"", ErrInvalid, quoted(s))
}

// Mount is a workspace prepared for one run.
type Mount struct {
	// Lower is the base version's tree: the overlay's lower layer, or, for
	// a read-only mount, the directory to bind read-only.
	Lower string
	// Upper and Work are the overlay's upper and work directories (empty
	// for a read-only mount).
	Upper, Work string
	// Base is the version the run starts from.
	Base int64
	// Room is how many bytes the run may write (the upper's size).
	Room     int64
	ReadOnly bool

	m     *Manager
	state mountState
	mu    sync.Mutex
	done  bool // released
}

// mountState is runs/<run>.json.
type mountState struct {
	Key  string    `json:"key"`
	ID   string    `json:"id"`
	Name string    `json:"name"`
	Run  string    `json:"run"`
	Base verRecord `json:"base"`
}

// Jail is what the jail mounts at /workspace for this Mount: an overlay
// of Upper on Lower (its options: sandbox.WorkspaceMount.OverlayOptions),
// or Lower read-only. The directory paths contain no ',' or ':' (Prepare's
// never do, as long as the workspace directory has none).
func (mt *Mount) Jail() *sandbox.WorkspaceMount {
	return &sandbox.WorkspaceMount{Lower: mt.Lower, Upper: mt.Upper, Work: mt.Work, ReadOnly: mt.ReadOnly}
}

// Prepare readies workspace ref for run (an id unique on this node, used
// for its directory: letters, digits, '-' and '_'). The caller must Commit
// (read-write) and Release the Mount when the run ends.
func (m *Manager) Prepare(ctx context.Context, c Caller, ref Ref, mode Mode, run string) (*Mount, error) {
	if err := checkRunID(run); err != nil {
		return nil, err
	}
	rec, key, err := m.find(ctx, c, ref)
	if err != nil {
		return nil, err
	}
	// The tree is in use before it is built, so the collector never
	// takes it between the two.
	m.mu.Lock()
	if m.mounts[run] {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: run %s already has a workspace mount", ErrExists, quoted(run))
	}
	m.mounts[run] = true
	m.inUse[rec.Head.Root]++
	m.mu.Unlock()
	mt := &Mount{Base: rec.Head.Number, ReadOnly: mode == ReadOnly, m: m,
		state: mountState{Key: key, ID: rec.ID, Name: rec.Name, Run: run, Base: rec.Head}}
	if mt.Lower, err = m.tree(ctx, rec.Head.Root, rec.Owner); err == nil && !mt.ReadOnly {
		err = m.prepareUpper(ctx, mt, rec)
	}
	if err != nil {
		if rerr := mt.Release(); rerr != nil {
			m.log.Warn("releasing a workspace mount that failed", "run", run, "err", rerr)
		}
		return nil, err
	}
	return mt, nil
}

// Warm builds the tree of the workspace's current version on this node
// if it has none, so that the next Prepare finds it: a version the node
// has not mounted costs a hard link per file to build, ≈ 0.3 s for
// 10,000 files here, against a millisecond once built. A commit on this
// node needs no Warm when the node had its base's tree: it derives the
// new version's tree from it (derive.go).
func (m *Manager) Warm(ctx context.Context, c Caller, ref Ref) error {
	rec, _, err := m.find(ctx, c, ref)
	if err != nil {
		return err
	}
	_, err = m.tree(ctx, rec.Head.Root, rec.Owner)
	return err
}

func checkRunID(run string) error {
	ok := run != "" && len(run) <= 64 && !strings.HasPrefix(run, "-")
	for _, r := range run {
		ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}
	if !ok {
		return fmt.Errorf("%w: run id %s", ErrInvalid, quoted(run))
	}
	return nil
}

// prepareUpper mounts the run's tmpfs, sized to the room the quotas
// leave, and makes the upper and work directories in it.
func (m *Manager) prepareUpper(ctx context.Context, mt *Mount, rec wsRecord) error {
	keyRoom, err := m.keyRoom(ctx, rec)
	if err != nil {
		return err
	}
	mt.Room = max(min(rec.QuotaBytes, keyRoom)-rec.Head.Bytes, 0)
	dir := filepath.Join(m.dirs.runs, mt.state.Run)
	b, err := json.Marshal(mt.state)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dir+".json", b, 0o600); err != nil {
		return fmt.Errorf("recording the mount of run %s: %w", mt.state.Run, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("preparing the mount of run %s: %w", mt.state.Run, err)
	}
	if err := mountTmpfs(dir, mt.Room, 2*m.lim.MaxEntries+64); err != nil {
		return err
	}
	mt.Upper, mt.Work = filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	if err := os.Mkdir(mt.Work, 0o700); err != nil {
		return fmt.Errorf("preparing the mount of run %s: %w", mt.state.Run, err)
	}
	if err := os.Mkdir(mt.Upper, 0o755); err != nil {
		return fmt.Errorf("preparing the mount of run %s: %w", mt.state.Run, err)
	}
	return m.ownDir(mt.Upper, 0o755)
}

// Commit scans what the run left in the upper directory and commits it
// against the base version: see the concurrency rule (merge.go). What
// does not fit the quotas and what may not be kept (links out, devices,
// FIFOs, sockets) is refused and listed. Commit may be called again after
// an error (the upper directory is untouched until Release).
func (mt *Mount) Commit(ctx context.Context) (Commit, error) {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if mt.ReadOnly {
		return Commit{Version: mt.Base, Base: mt.Base}, nil
	}
	if mt.done {
		return Commit{}, fmt.Errorf("%w: committing a released mount", ErrInvalid)
	}
	return mt.m.commitUpper(ctx, mt.state, mt.Upper, "run "+mt.state.Run, 1)
}

// commitUpper commits the upper directory of the mount st describes;
// held is how many uses of the base's tree the caller holds (see
// changeSet.held).
func (m *Manager) commitUpper(ctx context.Context, st mountState, upper, source string, held int) (Commit, error) {
	defer m.writing()()
	base, err := m.manifest(ctx, st.Base.Root)
	if err != nil {
		return Commit{}, err
	}
	rec, _, err := m.load(ctx, st.Key)
	if errors.Is(err, ErrNotFound) || (err == nil && rec.ID != st.ID) {
		return Commit{}, fmt.Errorf("%w: workspace %q was deleted", ErrNotFound, st.Name)
	}
	if err != nil {
		return Commit{}, err
	}
	cs, err := m.scan(ctx, upper, base, rec)
	if err != nil {
		return Commit{}, err
	}
	cs.base, cs.source, cs.partial, cs.held = st.Base, source, true, held
	return m.commit(ctx, st.Key, st.ID, cs)
}

// Release unmounts the run's tmpfs and removes its directories. Changes
// not committed are lost. Calling it again is a no-op.
func (mt *Mount) Release() error {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if mt.done {
		return nil
	}
	mt.done = true
	m := mt.m
	m.mu.Lock()
	delete(m.mounts, mt.state.Run)
	if m.inUse[mt.state.Base.Root]--; m.inUse[mt.state.Base.Root] <= 0 {
		delete(m.inUse, mt.state.Base.Root)
	}
	m.mu.Unlock()
	if mt.ReadOnly {
		return nil
	}
	return m.removeRun(mt.state.Run)
}

func (m *Manager) removeRun(run string) error {
	dir := filepath.Join(m.dirs.runs, run)
	if err := unmountTmpfs(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the mount of run %s: %w", run, err)
	}
	if err := os.Remove(dir + ".json"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the mount of run %s: %w", run, err)
	}
	return nil
}

// Recovered is a run's mount found by Recover.
type Recovered struct {
	Run       string `json:"run"`
	Workspace string `json:"workspace"`
	Commit    Commit `json:"commit"`
	// Err says why nothing was committed: the tmpfs was gone (the machine
	// restarted: the run's changes were in memory), or the commit failed.
	Err error `json:"-"`
}

// Recover commits the mounts of runs a previous server process left
// behind (it stopped between a run's end and its commit, or during the
// run) and removes them. The engine calls it once at start, before any
// Prepare; runs it recovers had ended with that process.
func (m *Manager) Recover(ctx context.Context) ([]Recovered, error) {
	names, err := filepath.Glob(filepath.Join(m.dirs.runs, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Recovered
	for _, name := range names {
		run := strings.TrimSuffix(filepath.Base(name), ".json")
		var st mountState
		b, err := os.ReadFile(name)
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		r := Recovered{Run: run, Workspace: st.Name, Err: err}
		dir := filepath.Join(m.dirs.runs, run)
		if r.Err == nil && !isMountPoint(dir) {
			r.Err = errors.New("the run's tmpfs is gone: its changes were lost with the machine's memory")
		}
		if r.Err == nil {
			r.Commit, r.Err = m.commitUpper(ctx, st, filepath.Join(dir, "upper"), "recovered run "+run, 0)
		}
		out = append(out, r)
		if r.Err != nil {
			m.log.Warn("recovering a run's workspace changes", "run", run, "workspace", st.Name, "err", r.Err)
		}
		// A commit that failed for want of the store is tried again at the
		// next start; what can never commit is removed.
		if r.Err == nil || st.Key == "" || !isMountPoint(dir) || errors.Is(r.Err, ErrNotFound) || errors.Is(r.Err, ErrCorrupt) {
			if err := m.removeRun(run); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}
