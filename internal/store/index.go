package store

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// IndexBucket holds one small entry per record (its Meta), kept in step
// with the record, so that listing never reads records it does not return.
const IndexBucket = "PYEXEC_INDEX"

// Meta is what the index knows of a record: the labels a listing filters
// on. The store gives them no meaning beyond equality; Final marks a record
// that eviction may remove; Async marks a record whose job waits in the
// queue while it is pending (entries of earlier versions lack it).
type Meta struct {
	Status string `json:"s"`
	Owner  string `json:"o,omitempty"`
	Final  bool   `json:"f,omitempty"`
	Async  bool   `json:"a,omitempty"`
}

// indexEntry is the in-memory form of one index entry.
type indexEntry struct {
	Meta
	rev     uint64    // revision in IndexBucket; a lower one never overwrites
	updated time.Time // when the entry was written; it expires with the TTL
}

// index is this node's copy of IndexBucket: every node watches the bucket,
// so writes of other nodes show up here too. Besides the entries it keeps
// one sorted key list per selector (everything; a status; an owner; a
// status and an owner; finished records), so a listing walks only keys
// that match its filter, under a read lock and without I/O: its cost and
// memory depend on its page size, not on the store's size. About 200
// bytes per record.
type index struct {
	ttl time.Duration

	mu      sync.RWMutex
	entries map[string]indexEntry
	lists   map[string][]string // selector → keys, ascending (oldest first)
	// tally counts the entries by Meta, for the fleet-wide counts of
	// tally.go.
	tally map[Meta]int
	// async counts the async entries by status and owner.
	async map[string]map[string]int
	// changed is closed and replaced whenever an entry changes.
	changed chan struct{}
	// queue holds every key by the earliest time it was written (see
	// expiries), for pruneExpired; pruned is when that last ran.
	queue  expiries
	pruned time.Time
}

func newIndex(ttl time.Duration) *index {
	return &index{ttl: ttl, entries: make(map[string]indexEntry), lists: make(map[string][]string),
		tally: make(map[Meta]int), async: make(map[string]map[string]int), changed: make(chan struct{})}
}

// Selectors name the key lists. The separator cannot occur in a status
// or an owner the engine writes (API key names and status words).
const (
	selAll      = "all"
	selFinished = "final"
	selSep      = "\x00"
)

// selector is the list that holds exactly the keys a listing with these
// filters wants.
func selector(status, owner string, allOwners bool) string {
	switch {
	case status != "" && !allOwners:
		return "so" + selSep + status + selSep + owner
	case status != "":
		return "s" + selSep + status
	case !allOwners:
		return "o" + selSep + owner
	}
	return selAll
}

// selectorsOf are the lists an entry with m belongs to.
func selectorsOf(m Meta) []string {
	sels := []string{selAll, selector(m.Status, "", true), selector("", m.Owner, false), selector(m.Status, m.Owner, false)}
	if m.Final {
		sels = append(sels, selFinished)
	}
	return sels
}

// put records m for key unless the index already holds a newer revision.
// rev 0 (a write whose revision is unknown) always applies.
func (ix *index) put(key string, m Meta, rev uint64, updated time.Time) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	old, ok := ix.entries[key]
	if ok && rev != 0 && old.rev > rev {
		return
	}
	ix.entries[key] = indexEntry{Meta: m, rev: max(rev, old.rev), updated: updated}
	if !ok || updated.Before(old.updated) {
		heap.Push(&ix.queue, expiry{key, updated}) // a later time is queued when the earlier one is due
	}
	if ok && old.Meta == m {
		return
	}
	if ok {
		ix.unlist(key, old.Meta)
	}
	ix.count(m, 1)
	for _, sel := range selectorsOf(m) {
		l := ix.lists[sel]
		i, _ := slices.BinarySearch(l, key)
		ix.lists[sel] = slices.Insert(l, i, key)
	}
}

func (ix *index) remove(key string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if e, ok := ix.entries[key]; ok {
		delete(ix.entries, key)
		ix.unlist(key, e.Meta)
	}
}

// count adds d to the tally of m and tells the watchers of changes;
// ix.mu is held.
func (ix *index) count(m Meta, d int) {
	if ix.tally[m] += d; ix.tally[m] <= 0 {
		delete(ix.tally, m)
	}
	if m.Async {
		byOwner := ix.async[m.Status]
		if byOwner == nil {
			byOwner = make(map[string]int)
			ix.async[m.Status] = byOwner
		}
		if byOwner[m.Owner] += d; byOwner[m.Owner] <= 0 {
			delete(byOwner, m.Owner)
		}
		if len(byOwner) == 0 {
			delete(ix.async, m.Status)
		}
	}
	close(ix.changed)
	ix.changed = make(chan struct{})
}

// unlist takes key out of the lists and the tally of m; ix.mu is held.
func (ix *index) unlist(key string, m Meta) {
	ix.count(m, -1)
	for _, sel := range selectorsOf(m) {
		l := ix.lists[sel]
		if i, found := slices.BinarySearch(l, key); found {
			l = slices.Delete(l, i, i+1)
		}
		if len(l) == 0 {
			delete(ix.lists, sel)
		} else {
			ix.lists[sel] = l
		}
	}
}

func (ix *index) has(key string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	_, ok := ix.entries[key]
	return ok
}

// newest returns up to n keys of the list sel that are older than before
// ("" starts at the newest), newest first. Expired entries are skipped.
func (ix *index) newest(sel, before string, n int) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	l := ix.lists[sel]
	end := len(l)
	if before != "" {
		end, _ = slices.BinarySearch(l, before)
	}
	cutoff := time.Now().Add(-ix.ttl)
	var out []string
	for i := end - 1; i >= 0 && len(out) < n; i-- {
		if ix.entries[l[i]].updated.After(cutoff) {
			out = append(out, l[i])
		}
	}
	return out
}

// oldest returns up to n keys of the list sel, oldest first.
func (ix *index) oldest(sel string, n int) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	l := ix.lists[sel]
	return slices.Clone(l[:min(n, len(l))])
}

// pruneGap is the least time between two prunes: the eviction loop asks
// for one up to ten times a second on a busy server, and each prune that
// finds something due rewrites the key lists. An expired entry lingers
// that long at most; listings skip it already.
const pruneGap = time.Minute

// pruneExpired drops the entries older than the TTL. It looks only at
// the keys queued as that old (see expiries), and takes them
// out of each list in one pass: its cost grows with what expires and the
// lists' tails, not with a walk of every entry. A key written again since
// goes back into the queue at its last write.
func (ix *index) pruneExpired() {
	now := time.Now()
	cutoff := now.Add(-ix.ttl)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if now.Sub(ix.pruned) < pruneGap {
		return
	}
	ix.pruned = now
	gone := make(map[string][]string) // selector → expired keys
	for _, x := range ix.queue.due(cutoff) {
		e, ok := ix.entries[x.key]
		switch {
		case !ok:
			// removed since; a later write queued it again
		case e.updated.After(cutoff):
			heap.Push(&ix.queue, expiry{x.key, e.updated})
		default:
			delete(ix.entries, x.key)
			ix.count(e.Meta, -1)
			for _, sel := range selectorsOf(e.Meta) {
				gone[sel] = append(gone[sel], x.key)
			}
		}
	}
	for sel, keys := range gone {
		slices.Sort(keys)
		if l := without(ix.lists[sel], keys); len(l) == 0 {
			delete(ix.lists, sel)
		} else {
			ix.lists[sel] = l
		}
	}
}

// without removes the keys of gone from l, both ascending, in place, in
// one pass from where the first of them would be.
func without(l, gone []string) []string {
	from, _ := slices.BinarySearch(l, gone[0])
	w := from
	for _, k := range l[from:] {
		for len(gone) > 0 && gone[0] < k {
			gone = gone[1:]
		}
		if len(gone) > 0 && gone[0] == k {
			gone = gone[1:]
			continue
		}
		l[w] = k
		w++
	}
	clear(l[w:])
	return l[:w]
}

func (s *NATS) openIndex(ctx context.Context) error {
	kv, err := s.openKV(ctx, IndexBucket, "pyexec index of execution records (status, owner)", s.cfg.TTL, -1)
	if err != nil {
		return err
	}
	s.indexKV = kv
	s.index = newIndex(s.cfg.TTL)
	return s.watchIndex(ctx)
}

// watchIndex loads the bucket into s.index and keeps following it. It
// returns once the current entries are loaded. The watcher ends when the
// connection closes.
func (s *NATS) watchIndex(ctx context.Context) error {
	// The watcher must outlive ctx, which bounds Open only.
	w, err := s.indexKV.WatchAll(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("watching the index: %w", err)
	}
	loaded := make(chan struct{})
	go func() {
		initial := true
		for e := range w.Updates() {
			if e == nil {
				if initial {
					initial = false
					close(loaded)
				}
				continue
			}
			s.applyIndex(e)
		}
		if initial {
			close(loaded)
		}
	}()
	select {
	case <-loaded:
		return nil
	case <-ctx.Done():
		_ = w.Stop()
		return fmt.Errorf("loading the index: %w", ctx.Err())
	}
}

func (s *NATS) applyIndex(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		s.index.remove(e.Key())
		return
	}
	var m Meta
	if err := json.Unmarshal(e.Value(), &m); err != nil {
		return // not written by this package; listings verify records anyway
	}
	s.index.put(e.Key(), m, e.Revision(), e.Created())
}

// putIndex writes the index entry of key, here at once and in the bucket
// for the other nodes.
func (s *NATS) putIndex(ctx context.Context, key string, m Meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("store: encoding index entry %s: %w", key, err)
	}
	rev, err := s.indexKV.Put(ctx, key, b)
	s.index.put(key, m, rev, time.Now())
	if err != nil {
		return fmt.Errorf("store: writing index entry %s: %w", key, mapErr(err))
	}
	return nil
}

// Reindex gives every record without an index entry one, from describe.
// Records written before the index existed (an older data directory) are
// found this way; it reads one record at a time, so it needs memory for
// the keys only. It returns how many entries it wrote.
func (s *NATS) Reindex(ctx context.Context, describe func(key string, value []byte) (Meta, error)) (int, error) {
	keys, err := s.sortedKeys(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		if s.index.has(k) {
			continue
		}
		e, err := s.Get(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return n, err
		}
		m, err := describe(k, e.Value)
		if err != nil {
			return n, fmt.Errorf("store: describing record %s: %w", k, err)
		}
		if err := s.putIndex(ctx, k, m); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// SetMeta rewrites the index entry of key; listings call it when they find
// an entry that no longer matches its record (a writer died between the
// two writes).
func (s *NATS) SetMeta(ctx context.Context, key string, m Meta) error {
	return s.putIndex(ctx, key, m)
}
