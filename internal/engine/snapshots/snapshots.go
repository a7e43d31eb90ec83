// Package snapshots keeps sessions' snapshots in the shared store: the
// server's key they are authenticated with, the size cap of one snapshot
// and each key's quota of them, streaming a snapshot into the store as a
// session's kernel writes it (Begin), verifying one out of the store before
// any of it is used (Open), describing, listing and deleting them. Any node
// of a fleet reads what another stored.
//
// It never runs a kernel nor reads a snapshot's state (engine/sessions
// makes and loads them; internal/snapshot is the file), and never checks
// who asks: the engine authorizes every call before it reaches this
// package.
package snapshots

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/snapshot"
	"github.com/pyexec/pyexec/internal/store"
)

// Errors; the engine re-exports them and the API maps them with
// errors.Is.
var (
	ErrNotFound = errors.New("snapshot not found") // 404
	// ErrQuota: the owner's snapshots hold as many snapshots or bytes as
	// one key may (429).
	ErrQuota = errors.New("snapshot quota reached")
	// ErrNoRoom: the spool directory has no room for a snapshot read
	// from the store (503: it may have later).
	ErrNoRoom = fmt.Errorf("%w: no room to read the snapshot", run.ErrUnavailable)
	// ErrDisabled: the server keeps no snapshots (501).
	ErrDisabled = errors.New("snapshots are not available on this server")
	// ErrTooLarge is the format's: one snapshot over the size cap (413).
	ErrTooLarge = snapshot.ErrTooLarge
	// ErrIntegrity is the format's: a stored snapshot that does not verify
	// for its owner under this server's key (400).
	ErrIntegrity = snapshot.ErrIntegrity
)

// Store is where snapshots are kept; *store.NATS implements it.
type Store interface {
	PutSnapshot(ctx context.Context, info store.SnapshotInfo, r io.Reader) (store.SnapshotInfo, error)
	GetSnapshot(ctx context.Context, id string) (io.ReadCloser, store.SnapshotInfo, error)
	StatSnapshot(ctx context.Context, id string) (store.SnapshotInfo, error)
	ListSnapshots(ctx context.Context) ([]store.SnapshotInfo, error)
	DeleteSnapshot(ctx context.Context, id string) error
}

var _ Store = (*store.NATS)(nil)

// Config is the operator's configuration of snapshots. Zero fields take
// the defaults documented on each.
type Config struct {
	// Key authenticates every snapshot; every node of a fleet needs the
	// same. Required.
	Key snapshot.Key
	// MaxBytes caps one snapshot (state, workspace and header). Default
	// 1 GiB.
	MaxBytes int64
	// QuotaBytes and QuotaCount bound the snapshots one key asked for
	// (and may list and delete). Defaults 4 GiB and 50.
	QuotaBytes int64
	QuotaCount int
	// HibernationBytes and HibernationCount bound, apart, the server's
	// own snapshots of one key's sessions (hibernation), which the key
	// neither sees nor deletes. Defaults QuotaBytes and QuotaCount.
	HibernationBytes int64
	HibernationCount int
	// SpoolDir is where a snapshot read from the store is kept while it
	// is verified and loaded (an unlinked file): the data directory.
	// Required.
	SpoolDir string
	// Spools bounds the snapshots this node reads out of the store and
	// verifies at once (restores and resumes): a further Open waits for a
	// turn, as long as its context lets it. A turn ends once the snapshot
	// verified, before it is loaded. Default 2.
	Spools int
	// SpoolBytes bounds the bytes of the snapshots spooled on this node
	// at once, from their read until they are closed (loaded), and one
	// key's at a quarter of it (at least MaxBytes): an Open past either
	// waits for room, as long as its context lets it, then fails with
	// ErrNoRoom. Default 4 × MaxBytes.
	SpoolBytes int64
	// ReadsPerOwner bounds one key's snapshots open at once on this node
	// (restores and resumes, read, verified and loaded): a further Open
	// of that key waits for one to close, as long as its context lets it,
	// so that no key takes the node's turns. Default 2.
	ReadsPerOwner int
}

func (c Config) withDefaults() Config {
	if c.MaxBytes == 0 {
		c.MaxBytes = 1 << 30
	}
	if c.QuotaBytes == 0 {
		c.QuotaBytes = 4 << 30
	}
	if c.QuotaCount == 0 {
		c.QuotaCount = 50
	}
	if c.HibernationBytes == 0 {
		c.HibernationBytes = c.QuotaBytes
	}
	if c.HibernationCount == 0 {
		c.HibernationCount = c.QuotaCount
	}
	if c.Spools == 0 {
		c.Spools = 2
	}
	if c.SpoolBytes == 0 {
		c.SpoolBytes = 4 * c.MaxBytes
	}
	if c.ReadsPerOwner == 0 {
		c.ReadsPerOwner = 2
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Key.IsZero():
		return errors.New("snapshots need the server's key")
	case c.SpoolDir == "":
		return errors.New("snapshots need a spool directory")
	case c.MaxBytes < 1<<20:
		return errors.New("the snapshot size cap must be at least 1 MiB")
	case c.QuotaBytes < c.MaxBytes || c.HibernationBytes < c.MaxBytes:
		return errors.New("a key's snapshot quota must be at least the size cap of one snapshot")
	case c.QuotaCount < 1 || c.HibernationCount < 1:
		return errors.New("a key's snapshot quota must allow at least one snapshot")
	case c.Spools < 1 || c.ReadsPerOwner < 1:
		return errors.New("at least one snapshot must be readable at a time")
	case c.SpoolBytes < c.MaxBytes:
		return errors.New("the spool's budget must hold at least one snapshot of the size cap")
	}
	return nil
}

// Info describes a stored snapshot.
type Info struct {
	ID             string           `json:"snapshot_id"`
	SessionID      string           `json:"session_id"`
	Owner          string           `json:"owner,omitempty"`
	Kind           string           `json:"kind"`
	Bytes          int64            `json:"bytes"`
	CreatedAt      time.Time        `json:"created_at"`
	PythonVersion  string           `json:"python_version"`
	ExecutionCount int              `json:"execution_count"`
	Skipped        []runner.Skipped `json:"skipped"`
}

// Labels of a snapshot in the store.
const (
	labelPython  = "python"
	labelCount   = "execution_count"
	labelSkipped = "skipped"
)

// maxSkippedLabel bounds the skipped list kept in the store's labels (the
// snapshot's own header has it whole).
const maxSkippedLabel = 32 << 10

// Service keeps this node's view of the snapshots in the store.
type Service struct {
	cfg Config
	st  Store
	log *slog.Logger

	mu     sync.Mutex
	owners map[string]*ownerLock // quota checks of one owner, one at a time
	// reads holds, per owner, a token per snapshot of it open
	// (Config.ReadsPerOwner); spooled counts the bytes spooled
	// (Config.SpoolBytes), spooledBy each owner's; spoolFreed is closed
	// (and replaced) when bytes are given back.
	reads      map[string]*ownerReads
	spooled    int64
	spooledBy  map[string]int64
	spoolFreed chan struct{}
	// spools holds a token per snapshot being read (Config.Spools).
	spools chan struct{}
}

type ownerReads struct {
	turns chan struct{}
	users int
}

type ownerLock struct {
	mu    sync.Mutex
	users int
}

// New checks cfg and returns the service; a nil st keeps no snapshots
// (every call fails with ErrDisabled).
func New(cfg Config, st Store, log *slog.Logger) (*Service, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if st == nil {
		return &Service{log: log}, nil
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, st: st, log: log, owners: make(map[string]*ownerLock), reads: make(map[string]*ownerReads),
		spooledBy: make(map[string]int64), spoolFreed: make(chan struct{}), spools: make(chan struct{}, cfg.Spools)}, nil
}

// Enabled reports whether the server keeps snapshots.
func (v *Service) Enabled() bool { return v.st != nil }

// MaxBytes is the size cap of one snapshot.
func (v *Service) MaxBytes() int64 { return v.cfg.MaxBytes }

// lockOwner serialises the quota checks of one owner on this node, from
// Begin to the end of the snapshot: two snapshots of one key made at once
// on one node cannot both take the last room. (Two nodes can: the
// quota may then be exceeded by one snapshot per node.)
func (v *Service) lockOwner(owner string) func() {
	v.mu.Lock()
	l := v.owners[owner]
	if l == nil {
		l = &ownerLock{}
		v.owners[owner] = l
	}
	l.users++
	v.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		v.mu.Lock()
		if l.users--; l.users == 0 {
			delete(v.owners, owner)
		}
		v.mu.Unlock()
	}
}

// usage counts owner's snapshots of kind, and their bytes.
func (v *Service) usage(ctx context.Context, owner, kind string) (n int, bytes int64, err error) {
	list, err := v.st.ListSnapshots(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, s := range list {
		if s.Owner == owner && s.Kind == kind {
			n++
			bytes += s.Size
		}
	}
	return n, bytes, nil
}

// Pending is a snapshot being written into the store.
type Pending struct {
	h      snapshot.Header
	w      *snapshot.Writer
	buf    *bufio.Writer
	pw     *io.PipeWriter
	done   chan putResult
	quota  string // why the writer's limit is below the cap, if it is
	unlock func()
	once   sync.Once
	res    putResult
}

type putResult struct {
	info store.SnapshotInfo
	err  error
}

// Begin starts storing the snapshot h describes (its ID, Owner and Kind
// set): what is written to the returned Pending's Writer goes into the
// store as it comes. Every snapshot must fit in its owner's quota of its
// kind (ErrQuota): the snapshots the owner asks for, or apart the
// server's own of the owner's sessions; and under the size cap
// (ErrTooLarge, from the writer). ctx bounds the whole store write.
func (v *Service) Begin(ctx context.Context, h snapshot.Header) (*Pending, error) {
	if !v.Enabled() {
		return nil, ErrDisabled
	}
	limit, quota := v.cfg.MaxBytes, ""
	unlock := v.lockOwner(h.Owner)
	n, used, err := v.usage(ctx, h.Owner, h.Kind)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("engine: counting the key's snapshots: %w", err)
	}
	q := v.quotaOf(h.Kind)
	if err := q.left(n, used); err != nil {
		unlock()
		return nil, err
	}
	if room := q.bytes - used; room < limit {
		limit = room
		quota = fmt.Sprintf("this snapshot would take %s over their quota of %d bytes (%d in use%s)", q.what, q.bytes, used, q.hint)
	}
	pr, pw := io.Pipe()
	p := &Pending{h: h, pw: pw, done: make(chan putResult, 1), quota: quota, unlock: unlock}
	p.buf = bufio.NewWriterSize(pw, 1<<20) // the kernel's channel delivers 32 KiB at a time
	w, err := snapshot.NewWriter(p.buf, v.cfg.Key, h, limit)
	if err != nil {
		unlock()
		return nil, err
	}
	p.w = w
	info := store.SnapshotInfo{ID: h.ID, Owner: h.Owner, Kind: h.Kind, Session: h.SessionID, Created: h.Created,
		Labels: labelsOf(h)}
	go func() {
		si, err := v.st.PutSnapshot(ctx, info, pr)
		pr.CloseWithError(errors.Join(err, io.ErrClosedPipe)) // a writer still writing stops
		p.done <- putResult{si, err}
	}()
	return p, nil
}

// quota is one key's bound on its snapshots of a kind.
type quota struct {
	count      int
	bytes      int64
	what, hint string // what is counted, and what the key can do of it
}

// quotaOf is the quota of the snapshots of kind.
func (v *Service) quotaOf(kind string) quota {
	if kind == snapshot.KindHibernation {
		return quota{count: v.cfg.HibernationCount, bytes: v.cfg.HibernationBytes,
			what: "the key's hibernated sessions", hint: "; end some sessions"}
	}
	return quota{count: v.cfg.QuotaCount, bytes: v.cfg.QuotaBytes, what: "the key's snapshots", hint: "; delete some"}
}

// left fails with ErrQuota when a key holding n snapshots of used bytes
// may not make another.
func (q quota) left(n int, used int64) error {
	switch {
	case n >= q.count:
		return fmt.Errorf("%w: %s hold %d snapshots, their quota (%s)", ErrQuota, q.what, n, q.hint[2:])
	case used >= q.bytes:
		return fmt.Errorf("%w: %s hold %d bytes, over their quota of %d (%s)", ErrQuota, q.what, used, q.bytes, q.hint[2:])
	}
	return nil
}

func labelsOf(h snapshot.Header) map[string]string {
	l := map[string]string{labelPython: h.Session.PythonVersion, labelCount: strconv.Itoa(h.ExecutionCount)}
	skipped := h.Skipped
	for len(skipped) > 0 {
		b, err := json.Marshal(skipped)
		if err == nil && len(b) <= maxSkippedLabel {
			l[labelSkipped] = string(b)
			break
		}
		skipped = skipped[:len(skipped)/2]
	}
	return l
}

// Writer is where the snapshot's state and workspace go.
func (p *Pending) Writer() *snapshot.Writer { return p.w }

// Header is the snapshot's header.
func (p *Pending) Header() snapshot.Header { return p.h }

// Commit ends the snapshot (its MAC), waits until the store holds it and
// returns its size.
func (p *Pending) Commit() (int64, error) {
	_, err := p.w.Close()
	if err == nil {
		err = p.buf.Flush()
	}
	if err != nil {
		return 0, p.Abort(err)
	}
	_ = p.pw.Close()
	p.finish()
	if p.res.err != nil {
		return 0, fmt.Errorf("engine: storing snapshot %s: %w", p.h.ID, p.res.err)
	}
	return p.res.info.Size, nil
}

// Abort drops the snapshot (the store keeps nothing of it) and returns
// why, as the caller should report it: err, or ErrQuota when the size the
// writer refused was the owner's quota rather than the cap.
func (p *Pending) Abort(err error) error {
	p.pw.CloseWithError(err)
	p.finish()
	if errors.Is(err, snapshot.ErrTooLarge) && p.quota != "" {
		return fmt.Errorf("%w: %s", ErrQuota, p.quota)
	}
	return err
}

func (p *Pending) finish() {
	p.once.Do(func() {
		p.res = <-p.done
		p.unlock()
	})
}

// Open reads snapshot id of owner from the store and verifies it whole
// (snapshot.Receive) before returning it: ErrNotFound when there is none,
// ErrIntegrity when it does not verify, ErrTooLarge over the cap. Nothing
// is spooled before the store's size of it was checked against the cap,
// the spool's budget (Config.SpoolBytes) and the spool directory's free
// space. Open waits, as long as ctx lets it, for one of the owner's turns
// (Config.ReadsPerOwner), held until the snapshot is closed, then for one
// of the node's (Config.Spools), held until it verified. The spool is an
// unlinked file, gone once the snapshot is closed or Open fails. The
// caller closes it.
func (v *Service) Open(ctx context.Context, id, owner string) (*snapshot.Snapshot, error) {
	if !v.Enabled() {
		return nil, ErrDisabled
	}
	si, err := v.st.StatSnapshot(ctx, id)
	if err != nil {
		return nil, v.readErr(id, err)
	}
	if si.Size > v.cfg.MaxBytes {
		return nil, fmt.Errorf("%w: snapshot %s holds %d bytes, over the cap of %d", ErrTooLarge, id, si.Size, v.cfg.MaxBytes)
	}
	done, err := v.ownerRead(ctx, id, owner)
	if err != nil {
		return nil, err
	}
	unspool, err := v.reserveSpool(ctx, id, owner, si.Size)
	if err != nil {
		done()
		return nil, err
	}
	s, err := v.spool(ctx, id, owner, si.Size)
	if err != nil {
		unspool()
		done()
		return nil, err
	}
	s.OnClose(func() {
		unspool()
		done()
	})
	return s, nil
}

// ownerRead waits for one of owner's turns to read a snapshot; done gives
// it back.
func (v *Service) ownerRead(ctx context.Context, id, owner string) (done func(), err error) {
	v.mu.Lock()
	r := v.reads[owner]
	if r == nil {
		r = &ownerReads{turns: make(chan struct{}, v.cfg.ReadsPerOwner)}
		v.reads[owner] = r
	}
	r.users++
	v.mu.Unlock()
	leave := func() {
		v.mu.Lock()
		if r.users--; r.users == 0 {
			delete(v.reads, owner)
		}
		v.mu.Unlock()
	}
	select {
	case r.turns <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, fmt.Errorf("engine: waiting to read snapshot %s behind the key's other restores: %w", id, ctx.Err())
	}
	return func() {
		<-r.turns
		leave()
	}, nil
}

// reserveSpool takes size bytes of the spool's budget for owner, within
// its share, waiting for them as long as ctx lets it; the returned func
// gives them back.
func (v *Service) reserveSpool(ctx context.Context, id, owner string, size int64) (func(), error) {
	share := max(v.cfg.MaxBytes, v.cfg.SpoolBytes/4)
	for {
		v.mu.Lock()
		taken, mine := v.spooled, v.spooledBy[owner]
		if taken+size <= v.cfg.SpoolBytes && mine+size <= share {
			v.spooled += size
			v.spooledBy[owner] += size
			v.mu.Unlock()
			return func() { v.unspool(owner, size) }, nil
		}
		freed := v.spoolFreed
		v.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, fmt.Errorf("engine: reading snapshot %s: %w: %d of the spool's %d bytes are taken, %d of them the key's (its share %d), %d needed: %v",
				id, ErrNoRoom, taken, v.cfg.SpoolBytes, mine, share, size, ctx.Err())
		}
	}
}

// unspool gives back size bytes of owner's, and wakes those waiting.
func (v *Service) unspool(owner string, size int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.spooled -= size
	if v.spooledBy[owner] -= size; v.spooledBy[owner] <= 0 {
		delete(v.spooledBy, owner)
	}
	close(v.spoolFreed)
	v.spoolFreed = make(chan struct{})
}

// spool reads and verifies snapshot id in one of the node's turns.
func (v *Service) spool(ctx context.Context, id, owner string, size int64) (*snapshot.Snapshot, error) {
	select {
	case v.spools <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("engine: waiting to read snapshot %s: %w", id, ctx.Err())
	}
	defer func() { <-v.spools }()
	return v.receive(ctx, id, owner, size)
}

// receive spools snapshot id, of size bytes by the store's account, and
// verifies it; never more than that size, nor than the cap, is written.
func (v *Service) receive(ctx context.Context, id, owner string, size int64) (*snapshot.Snapshot, error) {
	if free, err := freeBytes(v.cfg.SpoolDir); err == nil && free < size {
		return nil, fmt.Errorf("engine: reading snapshot %s: %w: %d bytes free in the spool directory, %d needed", id, ErrNoRoom, free, size)
	}
	rc, _, err := v.st.GetSnapshot(ctx, id)
	if err != nil {
		return nil, v.readErr(id, err)
	}
	defer rc.Close()
	s, err := snapshot.Receive(rc, v.cfg.SpoolDir, v.cfg.Key, owner, min(size, v.cfg.MaxBytes))
	if err != nil {
		if errors.Is(err, snapshot.ErrIntegrity) {
			v.log.Warn("a stored snapshot was refused", "snapshot_id", id, "owner", owner, "err", err)
			return nil, fmt.Errorf("snapshot %s: %w (every node of a fleet must hold the same snapshot key)", id, err)
		}
		return nil, err
	}
	return s, nil
}

// readErr is the error of reading snapshot id from the store.
func (v *Service) readErr(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return fmt.Errorf("engine: reading snapshot %s: %w", id, err)
}

// freeBytes is the room left for an unprivileged writer in dir's file
// system.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Stat describes snapshot id; ErrNotFound when there is none.
func (v *Service) Stat(ctx context.Context, id string) (Info, error) {
	if !v.Enabled() {
		return Info{}, ErrDisabled
	}
	si, err := v.st.StatSnapshot(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Info{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Info{}, fmt.Errorf("engine: reading snapshot %s: %w", id, err)
	}
	return infoOf(si), nil
}

// List describes the snapshots of kind whose owner may accepts, oldest
// first.
func (v *Service) List(ctx context.Context, kind string, may func(owner string) bool) ([]Info, error) {
	if !v.Enabled() {
		return nil, ErrDisabled
	}
	all, err := v.st.ListSnapshots(ctx)
	if err != nil {
		return nil, fmt.Errorf("engine: listing snapshots: %w", err)
	}
	out := []Info{}
	for _, si := range all {
		if si.Kind == kind && may(si.Owner) {
			out = append(out, infoOf(si))
		}
	}
	slices.SortFunc(out, func(a, b Info) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Delete removes snapshot id; a missing one is not an error.
func (v *Service) Delete(ctx context.Context, id string) error {
	if !v.Enabled() {
		return ErrDisabled
	}
	if err := v.st.DeleteSnapshot(ctx, id); err != nil {
		return fmt.Errorf("engine: deleting snapshot %s: %w", id, err)
	}
	return nil
}

// Stats counts the stored snapshots and their bytes, by kind.
func (v *Service) Stats(ctx context.Context) (map[string]Count, error) {
	if !v.Enabled() {
		return nil, nil
	}
	all, err := v.st.ListSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]Count{}
	for _, si := range all {
		c := out[si.Kind]
		c.Snapshots++
		c.Bytes += si.Size
		out[si.Kind] = c
	}
	return out, nil
}

// Count is a number of snapshots and their bytes.
type Count struct {
	Snapshots int
	Bytes     int64
}

func infoOf(si store.SnapshotInfo) Info {
	in := Info{ID: si.ID, SessionID: si.Session, Owner: si.Owner, Kind: si.Kind, Bytes: si.Size, CreatedAt: si.Created,
		PythonVersion: si.Labels[labelPython], Skipped: []runner.Skipped{}}
	in.ExecutionCount, _ = strconv.Atoi(si.Labels[labelCount])
	if s := si.Labels[labelSkipped]; s != "" {
		_ = json.Unmarshal([]byte(s), &in.Skipped) // our own label; a bad one lists nothing
	}
	return in
}
