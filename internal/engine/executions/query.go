package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/store"
)

// List page sizes.
const (
	defaultListLimit = 20
	maxListLimit     = 100
)

// List returns executions, most recent first, and the cursor of the next
// page ("" on the last page). Limit defaults to 20 and is capped at 100.
// It lists the executions of opts.Owner, or every caller's with
// opts.AllOwners; ErrInvalid when it has neither (fail closed).
//
// Candidates come from the store's index (status, owner, time), so only
// the records of the page are read: the cost and memory of a call depend
// on its limit, not on how many records the store holds.
func (e *Service) List(ctx context.Context, opts ListOptions) ([]*run.Execution, string, error) {
	limit := opts.Limit
	switch {
	case limit < 0:
		return nil, "", fmt.Errorf("%w: negative limit", run.ErrInvalid)
	case limit == 0:
		limit = defaultListLimit
	case limit > maxListLimit:
		limit = maxListLimit
	}
	switch opts.Status {
	case "", run.StatusPending, run.StatusRunning, run.StatusCompleted, run.StatusFailed, run.StatusKilled:
	default:
		return nil, "", fmt.Errorf("%w: unknown status %q", run.ErrInvalid, opts.Status)
	}
	if opts.Owner == "" && !opts.AllOwners {
		return nil, "", fmt.Errorf("%w: listing needs an owner", run.ErrInvalid)
	}
	sopts := store.ListOptions{
		Cursor: opts.Cursor, Limit: limit,
		Status: string(opts.Status), Owner: opts.Owner, AllOwners: opts.AllOwners,
		Match: e.indexCheck(ctx, opts),
	}
	page, next, err := e.st.List(ctx, sopts)
	if errors.Is(err, store.ErrBadCursor) {
		return nil, "", fmt.Errorf("%w: %w", run.ErrInvalid, err)
	}
	if err != nil {
		return nil, "", fmt.Errorf("engine: listing executions: %w", err)
	}
	out := make([]*run.Execution, 0, len(page))
	for _, ent := range page {
		var r Record
		if err := json.Unmarshal(ent.Value, &r); err != nil {
			return nil, "", fmt.Errorf("engine: decoding record %s: %w", ent.Key, err)
		}
		err := e.WithOutput(ctx, &r)
		if errors.Is(err, run.ErrNotFound) {
			continue // its output expired just before the record
		}
		if err != nil {
			return nil, "", err
		}
		out = append(out, &r.Execution)
	}
	return out, next, nil
}

// indexCheck checks each record a listing reads against the filter its
// index entry was chosen by. An entry can lag behind its record (the
// writer died between the two writes); such an entry is rewritten from the
// record and the record left out.
func (e *Service) indexCheck(ctx context.Context, opts ListOptions) func([]byte) bool {
	return func(v []byte) bool {
		var r Record
		if err := json.Unmarshal(v, &r); err != nil {
			return false
		}
		if (opts.Status == "" || r.Status == opts.Status) && (opts.AllOwners || r.Audit.Caller == opts.Owner) {
			return true
		}
		if err := e.st.SetMeta(ctx, r.ID, r.meta()); err != nil {
			e.log.Warn("repairing an index entry", "execution_id", r.ID, "err", err)
		}
		return false
	}
}

// describeRecord is the index entry of a stored record, for Reindex.
func describeRecord(_ string, value []byte) (store.Meta, error) {
	var r Record
	if err := json.Unmarshal(value, &r); err != nil {
		return store.Meta{}, err
	}
	return r.meta(), nil
}
