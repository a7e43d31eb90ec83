package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Limits bound what workspaces may hold. Zero fields take the defaults.
type Limits struct {
	// DefaultQuotaBytes is the quota of a workspace created without one
	// (1 GiB); MaxQuotaBytes the largest one may ask for (16 GiB).
	DefaultQuotaBytes int64
	MaxQuotaBytes     int64
	// KeyQuotaBytes caps what all workspaces of one key hold together
	// (their current versions); zero: no cap beyond each workspace's.
	KeyQuotaBytes int64
	// MaxWorkspaces is how many workspaces one key may have (100).
	MaxWorkspaces int
	// MaxEntries caps files, directories and links in one workspace
	// (100,000).
	MaxEntries int
	// KeepVersions is how many versions are kept, the current one
	// included (20); KeepFor drops older versions but the current one
	// sooner (30 days; negative: never by age).
	KeepVersions int
	KeepFor      time.Duration
}

func (l Limits) withDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.DefaultQuotaBytes, 1<<30)
	def(&l.MaxQuotaBytes, 16<<30)
	if l.MaxWorkspaces == 0 {
		l.MaxWorkspaces = 100
	}
	if l.MaxEntries == 0 {
		l.MaxEntries = 100_000
	}
	if l.KeepVersions == 0 {
		l.KeepVersions = 20
	}
	if l.KeepFor == 0 {
		l.KeepFor = 30 * 24 * time.Hour
	}
	return l
}

func (l Limits) check() error {
	switch {
	case l.DefaultQuotaBytes < 1 || l.MaxQuotaBytes < l.DefaultQuotaBytes:
		return fmt.Errorf("%w: workspace quotas: default %d, max %d", ErrInvalid, l.DefaultQuotaBytes, l.MaxQuotaBytes)
	case l.KeyQuotaBytes < 0 || l.MaxWorkspaces < 1 || l.MaxEntries < 1 || l.KeepVersions < 1:
		return fmt.Errorf("%w: workspace limits must be positive", ErrInvalid)
	}
	return nil
}

// Config configures a Manager.
type Config struct {
	// Dir is this node's workspace directory (blob cache, version trees,
	// run directories; on one node also the records). It must be on a
	// local file system that supports hard links.
	Dir string
	// UID and GID own the files of version trees and of a run's upper
	// directory: the sandbox user the payload runs as. Zero means 65534,
	// the jail's default; -1 leaves files owned by the server (when it
	// runs unprivileged).
	UID, GID int
	Limits   Limits
	Logger   *slog.Logger
	// Now is the clock (tests set it); nil means time.Now.
	Now func() time.Time
}

// Manager keeps the workspaces of every key: on one node (OpenLocal) or a
// fleet (OpenFleet). It is safe for concurrent use.
type Manager struct {
	dirs      dirs
	rec       records
	cache     *cache
	lim       Limits
	log       *slog.Logger
	now       func() time.Time
	treeLocks keyedLocks
	manifests manifestCache
	// treesBuilt counts trees built whole from their manifests;
	// treesDerived those derived from the tree of the version before
	// (derive.go). Stats reports both.
	treesBuilt, treesDerived atomic.Int64

	// gcMu: a writer holds it shared (writing) from the first blob it
	// caches until the head names them; the collector holds it alone.
	gcMu sync.RWMutex
	// collect asks the collector (Collect) for a collection soon: after a
	// Delete or a refused API write. Buffered by one, so asking never
	// blocks and asks pile into one collection.
	collect chan struct{}
	stats   statsCache

	mu     sync.Mutex
	inUse  map[string]int // tree root → mounts using it
	mounts map[string]bool
}

type dirs struct{ root, trees, runs, tmp string }

// OpenLocal opens the workspaces of one node: records and blobs under
// cfg.Dir, which is their store of record.
func OpenLocal(cfg Config) (*Manager, error) {
	m, err := newManager(cfg)
	if err != nil {
		return nil, err
	}
	if m.rec, err = newDirRecords(filepath.Join(m.dirs.root, "records")); err != nil {
		return nil, err
	}
	return m, nil
}

// OpenFleet opens the workspaces of a fleet: records and blobs in the
// buckets b opens on the fleet's JetStream, cfg.Dir this node's cache of
// them.
func OpenFleet(ctx context.Context, b Buckets, cfg Config) (*Manager, error) {
	m, err := newManager(cfg)
	if err != nil {
		return nil, err
	}
	rec, blobs, err := openNATS(ctx, b)
	if err != nil {
		return nil, err
	}
	m.rec, m.cache.remote = rec, blobs
	return m, nil
}

func newManager(cfg Config) (*Manager, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: no workspace directory", ErrInvalid)
	}
	lim := cfg.Limits.withDefaults()
	if err := lim.check(); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("workspace directory: %w", err)
	}
	d := dirs{root: root, trees: filepath.Join(root, "trees"), runs: filepath.Join(root, "runs"), tmp: filepath.Join(root, "tmp")}
	for _, dir := range []string{root, d.trees, d.runs, filepath.Join(root, "blobs"), filepath.Join(root, "variants")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	if err := os.Chmod(root, 0o700); err != nil {
		return nil, fmt.Errorf("workspace directory: %w", err)
	}
	// Nothing in tmp outlives the call that made it.
	if err := os.RemoveAll(d.tmp); err != nil {
		return nil, fmt.Errorf("clearing %s: %w", d.tmp, err)
	}
	if err := os.Mkdir(d.tmp, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", d.tmp, err)
	}
	// Trees half built or half derived (derive.go), whose directories may
	// be read-only.
	if err := removeTrees(filepath.Join(d.trees, ".build-*")); err != nil {
		return nil, err
	}
	uid, gid := cfg.UID, cfg.GID
	if uid == 0 {
		uid = 65534
	}
	if gid == 0 {
		gid = 65534
	}
	if uid < 0 || gid < 0 {
		uid, gid = -1, -1
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Manager{
		dirs: d, lim: lim, log: log, now: now,
		cache: &cache{blobs: filepath.Join(root, "blobs"), variants: filepath.Join(root, "variants"), tmp: d.tmp, uid: uid, gid: gid},
		inUse: map[string]int{}, mounts: map[string]bool{}, collect: make(chan struct{}, 1),
		stats: statsCache{sem: make(chan struct{}, 1)},
	}, nil
}

func removeTrees(pattern string) error {
	names, err := filepath.Glob(pattern)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeTree(n); err != nil {
			return err
		}
	}
	return nil
}

// Info describes a workspace.
type Info struct {
	Owner      string    `json:"owner"`
	Name       string    `json:"name"`
	QuotaBytes int64     `json:"quota_bytes"`
	Version    int64     `json:"version"`
	Bytes      int64     `json:"bytes"`
	Files      int       `json:"files"`
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`
}

func (r wsRecord) info() Info {
	return Info{Owner: r.Owner, Name: r.Name, QuotaBytes: r.QuotaBytes, Version: r.Head.Number,
		Bytes: r.Head.Bytes, Files: r.Head.Files, Created: r.Created, Updated: r.Head.Created}
}

// Version describes one kept version of a workspace.
type Version struct {
	Number  int64     `json:"number"`
	Parent  int64     `json:"parent"`
	Bytes   int64     `json:"bytes"`
	Files   int       `json:"files"`
	Created time.Time `json:"created"`
	// Source says what made it: "create", "run <id>", "upload", "write",
	// "delete", "restore of version N".
	Source string `json:"source"`
}

func (v verRecord) version() Version {
	return Version{Number: v.Number, Parent: v.Parent, Bytes: v.Bytes, Files: v.Files, Created: v.Created, Source: v.Source}
}

// writing is held by every call that caches blobs and commits them, so
// that the collector never takes a blob between the two. It must not be
// taken twice by one call (a waiting collector would deadlock it).
func (m *Manager) writing() (done func()) {
	m.gcMu.RLock()
	return m.gcMu.RUnlock
}

// Create makes an empty workspace (version 0) owned by c. quotaBytes zero
// takes the default quota.
func (m *Manager) Create(ctx context.Context, c Caller, name string, quotaBytes int64) (Info, error) {
	owner, err := c.resolve(Ref{Name: name})
	if err != nil {
		return Info{}, err
	}
	if quotaBytes == 0 {
		quotaBytes = m.lim.DefaultQuotaBytes
	}
	if quotaBytes < 0 || quotaBytes > m.lim.MaxQuotaBytes {
		return Info{}, fmt.Errorf("%w: a workspace quota is 1 to %d bytes", ErrInvalid, m.lim.MaxQuotaBytes)
	}
	have, err := m.rec.keys(ctx, ownerPrefix(owner))
	if err != nil {
		return Info{}, err
	}
	if len(have) >= m.lim.MaxWorkspaces {
		return Info{}, fmt.Errorf("%w: a key may have %d workspaces", ErrLimit, m.lim.MaxWorkspaces)
	}
	defer m.writing()()
	root, err := m.writeManifest(ctx, manifest{})
	if err == nil {
		err = m.cache.syncStore()
	}
	if err != nil {
		return Info{}, err
	}
	now := m.now()
	rec := wsRecord{ID: uuid.NewString(), Owner: owner, Name: name, QuotaBytes: quotaBytes, Created: now,
		Head: verRecord{Root: root, Created: now, Source: "create"}}
	b, err := json.Marshal(rec)
	if err != nil {
		return Info{}, err
	}
	if _, err := m.rec.create(ctx, wsKey(owner, name), b); errors.Is(err, ErrExists) {
		return Info{}, fmt.Errorf("%w: %q", ErrExists, name)
	} else if err != nil {
		return Info{}, err
	}
	return rec.info(), nil
}

// find loads the workspace ref names, as c may see it.
func (m *Manager) find(ctx context.Context, c Caller, ref Ref) (wsRecord, string, error) {
	owner, err := c.resolve(ref)
	if err != nil {
		return wsRecord{}, "", err
	}
	key := wsKey(owner, ref.Name)
	rec, _, err := m.load(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return wsRecord{}, "", fmt.Errorf("%w: workspace %q", ErrNotFound, ref.Name)
	}
	return rec, key, err
}

// Get describes a workspace.
func (m *Manager) Get(ctx context.Context, c Caller, ref Ref) (Info, error) {
	rec, _, err := m.find(ctx, c, ref)
	return rec.info(), err
}

// List lists owner's workspaces by name: the caller's own when owner is
// empty; another key's, or every key's (AllOwners), for an admin only.
func (m *Manager) List(ctx context.Context, c Caller, owner string) ([]Info, error) {
	if owner == "" {
		owner = c.Name
	}
	if owner == "" || (!c.Admin && owner != c.Name) {
		return nil, fmt.Errorf("%w: workspaces of %s", ErrNotFound, quoted(owner))
	}
	recs, err := m.listRecords(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := make([]Info, len(recs))
	for i, r := range recs {
		out[i] = r.info()
	}
	return out, nil
}

// Delete removes a workspace and its versions. Runs still using it keep
// their mounts; their commits fail with ErrNotFound. Its blobs and trees
// go at the next collection, which Delete asks for (Collect).
func (m *Manager) Delete(ctx context.Context, c Caller, ref Ref) error {
	rec, key, err := m.find(ctx, c, ref)
	if err != nil {
		return err
	}
	if err := m.rec.remove(ctx, key); err != nil {
		return err
	}
	nums, err := m.versionNumbers(ctx, rec.ID)
	if err != nil {
		return err
	}
	for _, n := range nums {
		if err := m.rec.remove(ctx, verKey(rec.ID, n)); err != nil {
			return err
		}
	}
	m.collectSoon()
	return nil
}

// Versions lists the kept versions of a workspace, oldest first, the
// current one last.
func (m *Manager) Versions(ctx context.Context, c Caller, ref Ref) ([]Version, error) {
	rec, _, err := m.find(ctx, c, ref)
	if err != nil {
		return nil, err
	}
	nums, err := m.versionNumbers(ctx, rec.ID)
	if err != nil {
		return nil, err
	}
	var out []Version
	for _, n := range nums {
		if n >= rec.Head.Number {
			continue
		}
		v, err := m.loadVersion(ctx, rec, n)
		if errors.Is(err, ErrNotFound) {
			continue // pruned since listed
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v.version())
	}
	return append(out, rec.Head.version()), nil
}

// Restore makes a new version equal to kept version n (the current one's
// files are kept as a version of their own, so a restore can be undone).
func (m *Manager) Restore(ctx context.Context, c Caller, ref Ref, n int64) (Commit, error) {
	rec, key, err := m.find(ctx, c, ref)
	if err != nil {
		return Commit{}, err
	}
	v, err := m.loadVersion(ctx, rec, n)
	if err != nil {
		return Commit{}, err
	}
	defer m.writing()()
	return m.commit(ctx, key, rec.ID, changeSet{base: rec.Head, restore: &v})
}

// writeManifest stores a manifest's pages and root (in the cache and, in
// a fleet, the store) and returns the root's hash.
func (m *Manager) writeManifest(ctx context.Context, man manifest) (string, error) {
	enc, err := man.encode()
	if err != nil {
		return "", err
	}
	for h, b := range enc.pages {
		if m.cache.has(h) {
			if err := m.cache.upload(ctx, h); err != nil {
				return "", err
			}
			continue
		}
		if _, err := m.cache.putDoc(b); err != nil {
			return "", err
		}
		if err := m.cache.upload(ctx, h); err != nil {
			return "", err
		}
	}
	if _, err := m.cache.putDoc(enc.root); err != nil {
		return "", err
	}
	if err := m.cache.upload(ctx, enc.rootHash); err != nil {
		return "", err
	}
	m.manifests.add(enc.rootHash, man)
	return enc.rootHash, nil
}

// manifest loads the manifest of root (fetching what this node lacks).
func (m *Manager) manifest(ctx context.Context, root string) (manifest, error) {
	if man, ok := m.manifests.get(root); ok {
		return man, nil
	}
	b, err := m.cache.readDoc(ctx, root)
	if err != nil {
		return nil, err
	}
	doc, err := decodeRoot(b)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	pages := map[string][]byte{}
	err = forEach(ctx, fetchWorkers, doc.Pages, func(ref pageRef) error {
		b, err := m.cache.readDoc(ctx, ref.Hash)
		mu.Lock()
		pages[ref.Hash] = b
		mu.Unlock()
		return err
	})
	if err != nil {
		return nil, err
	}
	man, err := decodeManifest(doc, pages)
	if err != nil {
		return nil, err
	}
	m.manifests.add(root, man)
	return man, nil
}

// manifestCache keeps the last few manifests loaded or written, by root,
// the oldest leaving first: a commit needs its base and the head, and a
// burst of calls on one workspace the same one again and again. Its
// manifests are shared: nobody changes one (merge copies).
type manifestCache struct {
	mu    sync.Mutex
	order []string
	byKey map[string]manifest
}

const manifestsCached = 8

func (c *manifestCache) get(root string) (manifest, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.byKey[root]
	return m, ok
}

func (c *manifestCache) add(root string, m manifest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[string]manifest{}
	}
	if _, ok := c.byKey[root]; ok {
		return
	}
	c.byKey[root] = m
	c.order = append(c.order, root)
	if len(c.order) > manifestsCached {
		delete(c.byKey, c.order[0])
		c.order = c.order[1:]
	}
}
