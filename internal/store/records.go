package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
)

// Create stores a new record; ErrExists when the key is taken.
func (s *NATS) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := s.records.Create(ctx, key, value)
	if err != nil {
		return 0, fmt.Errorf("store: creating record %s: %w", key, mapErr(err))
	}
	return rev, nil
}

// Get returns the latest value of a record.
func (s *NATS) Get(ctx context.Context, key string) (Entry, error) {
	e, err := s.records.Get(ctx, key)
	if err != nil {
		return Entry{}, fmt.Errorf("store: reading record %s: %w", key, mapErr(err))
	}
	return Entry{Key: key, Value: e.Value(), Revision: e.Revision()}, nil
}

// Update replaces a record if revision is still its latest one. This is
// the compare-and-set every state transition goes through: of two writers
// that read the same revision, exactly one wins and the other gets
// ErrConflict.
func (s *NATS) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	rev, err := s.records.Update(ctx, key, value, revision)
	if err != nil {
		return 0, fmt.Errorf("store: updating record %s: %w", key, mapErr(err))
	}
	return rev, nil
}

// List pages through the records, newest key first.
//
// Cost: every call lists all keys of the bucket (a metadata-only scan of
// the KV stream) and sorts them, then reads values one by one until the
// page is full. With the 24h TTL that bounds the bucket this is fine for
// thousands of records; a secondary index (a per-status KV or a stream
// keyed by time) would be needed for millions.
func (s *NATS) List(ctx context.Context, opts ListOptions) ([]Entry, string, error) {
	if opts.Limit <= 0 {
		return nil, "", fmt.Errorf("store: list limit %d is not positive", opts.Limit)
	}
	after, err := decodeCursor(opts.Cursor)
	if err != nil {
		return nil, "", err
	}
	keys, err := s.sortedKeys(ctx)
	if err != nil {
		return nil, "", err
	}
	start := 0
	if after != "" {
		// Keys are sorted newest first: skip those not older than the cursor.
		start, _ = slices.BinarySearchFunc(keys, after, func(k, target string) int {
			switch {
			case k > target:
				return -1
			case k < target:
				return 1
			}
			return 0
		})
		if start < len(keys) && keys[start] == after {
			start++
		}
	}
	var page []Entry
	for i := start; i < len(keys); i++ {
		e, err := s.Get(ctx, keys[i])
		if errors.Is(err, ErrNotFound) {
			continue // deleted or expired since the listing
		}
		if err != nil {
			return nil, "", err
		}
		if opts.Match != nil && !opts.Match(e.Value) {
			continue
		}
		page = append(page, e)
		if len(page) == opts.Limit {
			if i+1 < len(keys) {
				return page, encodeCursor(keys[i]), nil
			}
			break
		}
	}
	return page, "", nil
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
