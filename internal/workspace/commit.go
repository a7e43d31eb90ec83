package workspace

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Records of workspaces and versions, and the one way a version is made:
// apply a change set to the head and move the head by compare-and-set,
// merging again when another commit moved it first.

// wsRecord is a workspace: who owns it, its quota and its current
// version. ID tells a workspace from one of the same name created after it
// was deleted.
type wsRecord struct {
	ID         string    `json:"id"`
	Owner      string    `json:"owner"`
	Name       string    `json:"name"`
	QuotaBytes int64     `json:"quota_bytes"`
	Created    time.Time `json:"created"`
	Head       verRecord `json:"head"`
}

// verRecord is a version: the root of its manifest and what it holds.
type verRecord struct {
	Number  int64     `json:"number"`
	Parent  int64     `json:"parent"`
	Root    string    `json:"root"`
	Bytes   int64     `json:"bytes"`
	Files   int       `json:"files"`
	Entries int       `json:"entries"`
	Created time.Time `json:"created"`
	Source  string    `json:"source"`
	// NewBytes is what its files hold whose content its parent did not
	// have: what keeping it costs once it is no longer the head (prune).
	NewBytes int64 `json:"new_bytes,omitempty"`
}

// Record keys: "ws.<owner in hex>.<name>" for a workspace, and
// "ver.<workspace id>.<number, 16 digits>" for each version before the head.
func wsKey(owner, name string) string { return "ws." + hex.EncodeToString([]byte(owner)) + "." + name }

func ownerPrefix(owner string) string {
	if owner == AllOwners {
		return "ws."
	}
	return "ws." + hex.EncodeToString([]byte(owner)) + "."
}

func verPrefix(id string) string { return "ver." + id + "." }

func verKey(id string, n int64) string { return fmt.Sprintf("%s%016d", verPrefix(id), n) }

func (m *Manager) load(ctx context.Context, key string) (wsRecord, uint64, error) {
	b, rev, err := m.rec.get(ctx, key)
	if err != nil {
		return wsRecord{}, 0, err
	}
	var r wsRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return wsRecord{}, 0, fmt.Errorf("%w: workspace record %s: %v", ErrCorrupt, key, err)
	}
	return r, rev, nil
}

// changeSet is what a writer changed against its base version.
type changeSet struct {
	base    verRecord
	changes map[string]*entry // nil: deleted
	refused []Refused
	source  string
	// partial keeps what fits the quota and refuses the rest (a run, whose
	// writes happened already); otherwise the whole set fails with
	// ErrQuota (an API call, which can tell its client).
	partial bool
	// restore replaces the head by this manifest root, unmerged.
	restore *verRecord
	// held is how many mounts of the base's tree the writer holds (a
	// run's: 1): when they are its only users, the commit derives the new
	// version's tree from it (advanceTree).
	held int
}

// Commit is the outcome of committing a change set.
type Commit struct {
	// Version is the workspace's version after the commit: a new one when
	// Changed, else the head the change set found.
	Version   int64      `json:"version"`
	Base      int64      `json:"base"`
	Changed   bool       `json:"changed"`
	Added     int        `json:"added"`
	Modified  int        `json:"modified"`
	Deleted   int        `json:"deleted"`
	Conflicts []Conflict `json:"conflicts,omitempty"`
	Refused   []Refused  `json:"refused,omitempty"`
}

// commitAttempts bounds how often a commit merges again after losing the
// race for the head: each loss means another commit landed, so only a
// flood of commits to one workspace reaches it.
const commitAttempts = 100

// commit applies cs to the workspace under key (whose ID must still be
// id) and returns what it made. The caller holds m.writing from before it
// cached the blobs of cs.
func (m *Manager) commit(ctx context.Context, key, id string, cs changeSet) (Commit, error) {
	base, err := m.manifest(ctx, cs.base.Root)
	if err != nil {
		return Commit{}, err
	}
	for range commitAttempts {
		rec, rev, err := m.load(ctx, key)
		if errors.Is(err, ErrNotFound) || (err == nil && rec.ID != id) {
			return Commit{}, fmt.Errorf("%w: the workspace was deleted", ErrNotFound)
		}
		if err != nil {
			return Commit{}, err
		}
		out, next, err := m.prepareCommit(ctx, rec, base, cs)
		if err != nil || !out.Changed {
			return out, err
		}
		// The old head joins the history before the head moves, so no
		// version is ever in neither place.
		if err := m.putVersion(ctx, rec.ID, rec.Head); err != nil {
			return Commit{}, err
		}
		rec.Head = next
		b, err := json.Marshal(rec)
		if err != nil {
			return Commit{}, err
		}
		if _, err := m.rec.update(ctx, key, b, rev); errors.Is(err, errRevision) {
			continue // another commit moved the head: merge again
		} else if err != nil {
			return Commit{}, err
		}
		m.prune(ctx, rec)
		m.advanceTree(ctx, rec.Owner, cs.base.Root, next.Root, cs.held)
		return out, nil
	}
	return Commit{}, fmt.Errorf("committing to workspace %s: the head moved %d times in a row", key, commitAttempts)
}

// prepareCommit merges cs into rec's head, holds it to the quotas, and
// stores what the new version needs (blobs, manifest) — everything but
// moving the head.
func (m *Manager) prepareCommit(ctx context.Context, rec wsRecord, base manifest, cs changeSet) (Commit, verRecord, error) {
	head, err := m.manifest(ctx, rec.Head.Root)
	if err != nil {
		return Commit{}, verRecord{}, err
	}
	n := rec.Head.Number + 1
	out := Commit{Version: rec.Head.Number, Base: cs.base.Number, Refused: slices.Clone(cs.refused)}
	var mg merged
	if cs.restore != nil {
		old, err := m.manifest(ctx, cs.restore.Root)
		if err != nil {
			return Commit{}, verRecord{}, err
		}
		mg = merged{man: maps.Clone(old), ours: map[string]bool{}}
	} else {
		mg = merge(base, head, cs.base.Number, n, cs.changes)
	}
	refused, err := beyondLimits(head, &mg, cs.partial)
	if err != nil {
		return Commit{}, verRecord{}, err
	}
	out.Refused = append(out.Refused, refused...)
	refused, err = escapingLinks(head, &mg, cs.partial)
	if err != nil {
		return Commit{}, verRecord{}, err
	}
	out.Refused = append(out.Refused, refused...)
	refused, err = m.fit(ctx, rec, head, &mg, cs.partial)
	if err != nil {
		return Commit{}, verRecord{}, err
	}
	out.Refused = append(out.Refused, refused...)
	out.Added, out.Modified, out.Deleted, out.Conflicts = mg.added, mg.modified, mg.deleted, notKept(mg.conflicts, out.Refused)
	if maps.EqualFunc(mg.man, head, func(a, b entry) bool { return a == b }) {
		return out, verRecord{}, nil
	}
	if err := mg.man.checkTree(); err != nil {
		return Commit{}, verRecord{}, fmt.Errorf("merging into workspace %s: %w", rec.Name, err)
	}
	if err := m.uploadNew(ctx, head, mg.man); err != nil {
		return Commit{}, verRecord{}, err
	}
	root, err := m.writeManifest(ctx, mg.man)
	if err == nil {
		err = m.cache.syncStore()
	}
	if err != nil {
		return Commit{}, verRecord{}, err
	}
	u := mg.man.usage()
	source := cs.source
	if cs.restore != nil {
		source = fmt.Sprintf("restore of version %d", cs.restore.Number)
	}
	next := verRecord{Number: n, Parent: rec.Head.Number, Root: root, Bytes: u.Bytes, Files: u.Files,
		Entries: u.Entries, Created: m.now(), Source: source, NewBytes: newBytes(head, mg.man)}
	out.Version, out.Changed = n, true
	return out, next, nil
}

// uploadNew makes the store of record hold every file blob of man that
// head does not reference (a no-op on one node).
func (m *Manager) uploadNew(ctx context.Context, head, man manifest) error {
	if m.cache.remote == nil {
		return nil
	}
	known := map[string]bool{}
	for _, e := range head {
		known[e.Hash] = true
	}
	var fresh []string
	for _, e := range man {
		if e.Kind == kindFile && !known[e.Hash] {
			known[e.Hash] = true
			fresh = append(fresh, e.Hash)
		}
	}
	return forEach(ctx, fetchWorkers, fresh, func(h string) error { return m.cache.upload(ctx, h) })
}

// notKept clears the kept_as of each conflict whose copy was refused (over
// the quota, say): the writer is told its content was not kept, and why.
func notKept(conflicts []Conflict, refused []Refused) []Conflict {
	why := map[string]string{}
	for _, r := range refused {
		why[r.Path] = r.Reason
	}
	for i, c := range conflicts {
		if r, ok := why[c.KeptAs]; ok && c.KeptAs != "" {
			conflicts[i].Reason = fmt.Sprintf("%s; but that copy was not kept: %s", c.Reason, r)
			conflicts[i].KeptAs = ""
		}
	}
	return conflicts
}

// beyondLimits holds every path of the merged tree to the jail's path
// limits (sandbox.CheckPathLimits), so no stored version has a path a run
// could not mount. A partial commit refuses each path beyond them (the
// head's entry put back if it had one); a whole one fails.
func beyondLimits(head manifest, mg *merged, partial bool) ([]Refused, error) {
	var refused []Refused
	for _, p := range mg.man.paths() {
		err := sandbox.CheckPathLimits(p)
		if err == nil {
			continue
		}
		if !partial {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, quoted(p), err)
		}
		refused = append(refused, Refused{Path: p, Reason: err.Error()})
		if h, ok := head[p]; ok {
			mg.man[p] = h
		} else {
			delete(mg.man, p)
		}
	}
	return refused, nil
}

// escapingLinks judges every link of the merged tree through the tree
// (linkEscapes). A partial commit (a run's) refuses each link that climbs
// above the top, the head's entry at its path put back if it was no link;
// a whole one fails. Taking a link out can change how others resolve, so
// it judges again until none escapes.
func escapingLinks(head manifest, mg *merged, partial bool) ([]Refused, error) {
	var refused []Refused
	for {
		var bad []string
		for p, e := range mg.man {
			if e.Kind == kindLink && mg.man.linkEscapes(p) {
				bad = append(bad, p)
			}
		}
		if len(bad) == 0 {
			return refused, nil
		}
		slices.Sort(bad)
		if !partial {
			return nil, fmt.Errorf("%w: the symbolic link %s would point out of the workspace through other links", ErrInvalid, quoted(bad[0]))
		}
		for _, p := range bad {
			refused = append(refused, Refused{Path: p, Reason: fmt.Sprintf("a symbolic link pointing out of the workspace through other links (to %s)", quoted(mg.man[p].Target))})
			if h, ok := head[p]; ok && h.Kind != kindLink {
				mg.man[p] = h
			} else {
				delete(mg.man, p)
			}
		}
	}
}

// fit holds the merged manifest to the workspace's quota, the key's quota
// and the entry limit. Over them, a partial commit puts back the head's
// entry for this writer's files in path order from the first that does
// not fit, refusing each; a whole commit fails.
func (m *Manager) fit(ctx context.Context, rec wsRecord, head manifest, mg *merged, partial bool) ([]Refused, error) {
	room, err := m.keyRoom(ctx, rec)
	if err != nil {
		return nil, err
	}
	quota := min(rec.QuotaBytes, room)
	u := mg.man.usage()
	if u.Bytes <= quota && u.Entries <= m.lim.MaxEntries {
		return nil, nil
	}
	if !partial {
		if u.Entries > m.lim.MaxEntries {
			return nil, fmt.Errorf("%w: the workspace would hold %d files and directories; the limit is %d", ErrLimit, u.Entries, m.lim.MaxEntries)
		}
		return nil, quotaError(rec, u.Bytes, room)
	}
	// Take this writer's files and links back out, then let them in again
	// one by one while they fit.
	var mine []entry
	for _, p := range mg.man.paths() {
		if e := mg.man[p]; mg.ours[p] && e.Kind != kindDir {
			mine = append(mine, e)
			if h, ok := head[p]; ok && h.Kind != kindDir {
				mg.man[p] = h
			} else {
				delete(mg.man, p)
			}
		}
	}
	u = mg.man.usage()
	var refused []Refused
	for _, e := range mine {
		old, had := mg.man[e.Path]
		grow, more := e.Size, 1
		if had {
			grow, more = e.Size-old.Size, 0
		}
		if u.Bytes+grow > quota || u.Entries+more > m.lim.MaxEntries {
			refused = append(refused, Refused{Path: e.Path, Reason: fmt.Sprintf("over the quota: %d bytes did not fit", e.Size)})
			continue
		}
		mg.man[e.Path] = e
		u.Bytes += grow
		u.Entries += more
	}
	return refused, nil
}

// roomFor is how many more bytes rec's workspace may take on top of
// base: its quota or the key's room, less what base holds; what, the
// quota that binds, for messages. API writes measure what they stage
// against it before any byte becomes a blob.
func (m *Manager) roomFor(ctx context.Context, rec wsRecord, base manifest) (room int64, what string, err error) {
	keyRoom, err := m.keyRoom(ctx, rec)
	if err != nil {
		return 0, "", err
	}
	what = "the workspace's quota"
	if keyRoom < rec.QuotaBytes {
		what = "the key's quota"
	}
	return min(rec.QuotaBytes, keyRoom) - base.usage().Bytes, what, nil
}

// fitsBefore holds base with changes applied to the quotas and the entry
// limit, as the commit will, before staged bytes are placed as blobs.
func (m *Manager) fitsBefore(ctx context.Context, rec wsRecord, base manifest, changes map[string]*entry) error {
	man := maps.Clone(base)
	for p, e := range changes {
		if e == nil {
			delete(man, p)
		} else {
			man[p] = *e
		}
	}
	_, err := m.fit(ctx, rec, base, &merged{man: man}, false)
	return err
}

// commitPlaced commits an API change whose blobs were just placed. When
// the commit fails (the head moved and the merge no longer fits, say),
// those blobs are referenced by nothing: a collection is asked for, so
// they do not stay.
func (m *Manager) commitPlaced(ctx context.Context, key, id string, cs changeSet) (Commit, error) {
	out, err := m.commit(ctx, key, id, cs)
	if err != nil {
		m.collectSoon()
	}
	return out, err
}

func quotaError(rec wsRecord, bytes, keyRoom int64) error {
	if keyRoom < rec.QuotaBytes {
		return fmt.Errorf("%w: the workspace would hold %d bytes; the key has room for %d", ErrQuota, bytes, keyRoom)
	}
	return fmt.Errorf("%w: the workspace would hold %d bytes; its quota is %d", ErrQuota, bytes, rec.QuotaBytes)
}

// keyRoom is how many bytes rec's workspace may hold under the key's
// quota: the quota less what the key's other workspaces hold at their
// heads. Two commits to two workspaces of one key at once each see the
// other's head from before, so together they may pass the key's quota by
// the second's growth; each workspace's own quota holds exactly.
func (m *Manager) keyRoom(ctx context.Context, rec wsRecord) (int64, error) {
	if m.lim.KeyQuotaBytes <= 0 {
		return rec.QuotaBytes, nil
	}
	others, err := m.listRecords(ctx, rec.Owner)
	if err != nil {
		return 0, err
	}
	room := m.lim.KeyQuotaBytes
	for _, o := range others {
		if o.ID != rec.ID {
			room -= o.Head.Bytes
		}
	}
	return max(room, 0), nil
}

// listRecords reads the records of owner's workspaces (AllOwners: all).
func (m *Manager) listRecords(ctx context.Context, owner string) ([]wsRecord, error) {
	keys, err := m.rec.keys(ctx, ownerPrefix(owner))
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	out := make([]wsRecord, 0, len(keys))
	for _, k := range keys {
		r, _, err := m.load(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue // deleted since listed
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (m *Manager) putVersion(ctx context.Context, id string, v verRecord) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return m.rec.put(ctx, verKey(id, v.Number), b)
}

// versionNumbers lists the numbers of a workspace's versions before its
// head, oldest first.
func (m *Manager) versionNumbers(ctx context.Context, id string) ([]int64, error) {
	keys, err := m.rec.keys(ctx, verPrefix(id))
	if err != nil {
		return nil, err
	}
	out := make([]int64, 0, len(keys))
	for _, k := range keys {
		n, err := strconv.ParseInt(strings.TrimPrefix(k, verPrefix(id)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: version key %q", ErrCorrupt, k)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

func (m *Manager) loadVersion(ctx context.Context, rec wsRecord, n int64) (verRecord, error) {
	if n == rec.Head.Number {
		return rec.Head, nil
	}
	b, _, err := m.rec.get(ctx, verKey(rec.ID, n))
	if errors.Is(err, ErrNotFound) {
		return verRecord{}, fmt.Errorf("%w: version %d of workspace %q (not kept)", ErrNotFound, n, rec.Name)
	}
	if err != nil {
		return verRecord{}, err
	}
	var v verRecord
	if err := json.Unmarshal(b, &v); err != nil || v.Number != n {
		return verRecord{}, fmt.Errorf("%w: version %d of workspace %q", ErrCorrupt, n, rec.Name)
	}
	return v, nil
}

// newBytes is the size of man's files whose content head lacks.
func newBytes(head, man manifest) int64 {
	had := map[string]bool{}
	for _, e := range head {
		if e.Kind == kindFile {
			had[e.Hash] = true
		}
	}
	var n int64
	for _, e := range man {
		if e.Kind == kindFile && !had[e.Hash] {
			had[e.Hash] = true
			n += e.Size
		}
	}
	return n
}

// prune drops the versions beyond what is kept: at most KeepVersions
// versions counting the head, none replaced longer than KeepFor ago (a
// version's age counts from when the next one replaced it, so the version
// before a change can be restored for KeepFor after it), and none older
// than the newest ones whose new content (the sum of their NewBytes)
// passes the workspace's quota: so what only old versions keep on disk
// stays within about twice the quota. The
// blobs they alone referenced go at the next collection (GC). A failure
// is logged: the commit it follows stands.
func (m *Manager) prune(ctx context.Context, rec wsRecord) {
	nums, err := m.versionNumbers(ctx, rec.ID)
	if err != nil {
		m.log.Warn("listing workspace versions to prune", "workspace", rec.Name, "err", err)
		return
	}
	nums = slices.DeleteFunc(nums, func(n int64) bool { return n >= rec.Head.Number })
	keep := m.lim.KeepVersions - 1 // the head is one
	replaced := rec.Head.Created   // when the newest of nums was replaced
	var history int64              // NewBytes of the versions kept so far
	for i := len(nums) - 1; i >= 0; i-- {
		n := nums[i]
		v, err := m.loadVersion(ctx, rec, n)
		if err == nil {
			history += v.NewBytes
		}
		old := len(nums)-i > keep || (err == nil && m.lim.KeepFor > 0 && m.now().Sub(replaced) > m.lim.KeepFor) ||
			history > rec.QuotaBytes
		if err == nil {
			replaced = v.Created
		}
		if old {
			if err := m.rec.remove(ctx, verKey(rec.ID, n)); err != nil {
				m.log.Warn("pruning a workspace version", "workspace", rec.Name, "version", n, "err", err)
			}
		}
	}
}
