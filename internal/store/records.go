package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// Create stores a new record and its index entry; ErrExists when the key
// is taken. As with Update, an error wrapping ErrIndex means the record
// was stored without its index entry. A value too large for a message is
// spilled (spill.go).
func (s *NATS) Create(ctx context.Context, key string, value []byte, meta Meta) (uint64, error) {
	stored, ref, err := s.recordValue(ctx, key, value)
	if err != nil {
		return 0, fmt.Errorf("store: creating record %s: %w", key, err)
	}
	rev, err := s.records.Create(ctx, key, stored)
	if err != nil {
		return 0, fmt.Errorf("store: creating record %s: %w", key, errors.Join(mapErr(err), s.dropRef(ctx, ref)))
	}
	if err := s.putIndex(ctx, key, meta); err != nil {
		return rev, fmt.Errorf("%w: %w", ErrIndex, err)
	}
	return rev, nil
}

// dropRef deletes the spilled copy of a value whose write failed.
func (s *NATS) dropRef(ctx context.Context, ref *spillRef) error {
	if ref == nil {
		return nil
	}
	return s.dropSpilled(context.WithoutCancel(ctx), ref.Name)
}

// Get returns the latest value of a record.
func (s *NATS) Get(ctx context.Context, key string) (Entry, error) {
	e, err := s.records.Get(ctx, key)
	if err != nil {
		return Entry{}, fmt.Errorf("store: reading record %s: %w", key, mapErr(err))
	}
	v, err := s.resolveRecord(ctx, e.Value())
	if err != nil {
		return Entry{}, fmt.Errorf("store: reading record %s: %w", key, err)
	}
	return Entry{Key: key, Value: v, Revision: e.Revision()}, nil
}

// Update replaces a record if revision is still its latest one, then its
// index entry. This is the compare-and-set every state transition goes
// through: of two writers that read the same revision, exactly one wins
// and the other gets ErrConflict.
//
// The record is the truth and the index a hint: when the record was
// written but its index entry was not, Update returns the new revision
// with an error wrapping ErrIndex, and listings, which check every record
// they return, repair the entry when they meet it.
func (s *NATS) Update(ctx context.Context, key string, value []byte, revision uint64, meta Meta) (uint64, error) {
	stored, ref, err := s.recordValue(ctx, key, value)
	if err != nil {
		return 0, fmt.Errorf("store: updating record %s: %w", key, err)
	}
	rev, err := s.records.Update(ctx, key, stored, revision)
	if err != nil {
		return 0, fmt.Errorf("store: updating record %s: %w", key, errors.Join(mapErr(err), s.dropRef(ctx, ref)))
	}
	if err := s.putIndex(ctx, key, meta); err != nil {
		return rev, fmt.Errorf("%w: %w", ErrIndex, err)
	}
	return rev, nil
}

// Delete removes a record, its spilled copy and its index entry.
// Removing a record that is already gone is not an error.
func (s *NATS) Delete(ctx context.Context, key string) error {
	s.index.remove(key)
	e, err := s.records.Get(ctx, key)
	switch {
	case err == nil:
		if r, ok, _ := recordRef(e.Value()); ok {
			if err := s.dropSpilled(ctx, r.Name); err != nil {
				return fmt.Errorf("store: deleting record %s: %w", key, err)
			}
		}
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("store: deleting record %s: %w", key, mapErr(err))
	}
	if err := s.records.Purge(ctx, key); err != nil {
		return fmt.Errorf("store: deleting record %s: %w", key, mapErr(err))
	}
	if err := s.indexKV.Purge(ctx, key); err != nil {
		return fmt.Errorf("store: deleting index entry %s: %w", key, mapErr(err))
	}
	return nil
}

// List pages through the records whose index entries match opts, newest
// key first.
//
// Cost: candidates come from this node's copy of the index (no I/O, no
// scan of the bucket); only the records of the page are read, plus any
// whose entry turns out stale (opts.Match refuses them) or expired. So a
// page of limit records costs about limit reads whatever the store holds.
func (s *NATS) List(ctx context.Context, opts ListOptions) ([]Entry, string, error) {
	if opts.Limit <= 0 {
		return nil, "", fmt.Errorf("store: list limit %d is not positive", opts.Limit)
	}
	before, err := decodeCursor(opts.Cursor)
	if err != nil {
		return nil, "", err
	}
	sel := selector(opts.Status, opts.Owner, opts.AllOwners)
	var page []Entry
	for {
		// One more candidate than needed tells whether a next page exists.
		batch := s.index.newest(sel, before, opts.Limit-len(page)+1)
		for _, k := range batch {
			if len(page) == opts.Limit {
				return page, encodeCursor(page[len(page)-1].Key), nil
			}
			before = k
			e, err := s.Get(ctx, k)
			if errors.Is(err, ErrNotFound) {
				s.index.remove(k) // expired or evicted meanwhile
				continue
			}
			if err != nil {
				return nil, "", err
			}
			if opts.Match != nil && !opts.Match(e.Value) {
				continue
			}
			page = append(page, e)
		}
		if len(batch) == 0 {
			return page, "", nil
		}
	}
}

// sortedKeys lists every key, newest (greatest) first.
func (s *NATS) sortedKeys(ctx context.Context) ([]string, error) {
	lister, err := s.records.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: listing records: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	// The lister stops itself after the last key, or early when ctx ends.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: listing records: %w", err)
	}
	slices.Sort(keys)
	slices.Reverse(keys)
	return slices.Compact(keys), nil
}

// A cursor is the last key of the previous page, base64url-encoded so that
// callers treat it as opaque.
func encodeCursor(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

func decodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", fmt.Errorf("store: invalid cursor %q: %w", c, ErrBadCursor)
	}
	return string(b), nil
}
