package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pyexec/pyexec/internal/store"
)

// List page sizes.
const (
	defaultListLimit = 20
	maxListLimit     = 100
)

// Get returns the record of an execution; ErrNotFound when there is none
// (or it expired), or when it is not c's.
func (e *Engine) Get(ctx context.Context, c Caller, id string) (*Execution, error) {
	r, _, err := e.loadFor(ctx, c, id, actionRead)
	if err != nil {
		return nil, err
	}
	return &r.Execution, nil
}

// List returns executions, most recent first, and the cursor of the next
// page ("" on the last page). Limit defaults to 20 and is capped at 100.
// It lists the executions of opts.Owner, or every caller's with
// opts.AllOwners; ErrInvalid when it has neither (fail closed).
func (e *Engine) List(ctx context.Context, opts ListOptions) ([]*Execution, string, error) {
	limit := opts.Limit
	switch {
	case limit < 0:
		return nil, "", fmt.Errorf("%w: negative limit", ErrInvalid)
	case limit == 0:
		limit = defaultListLimit
	case limit > maxListLimit:
		limit = maxListLimit
	}
	switch opts.Status {
	case "", StatusPending, StatusRunning, StatusCompleted, StatusFailed, StatusKilled:
	default:
		return nil, "", fmt.Errorf("%w: unknown status %q", ErrInvalid, opts.Status)
	}
	if opts.Owner == "" && !opts.AllOwners {
		return nil, "", fmt.Errorf("%w: listing needs an owner", ErrInvalid)
	}
	match := func(v []byte) bool {
		var s struct {
			Status Status    `json:"status"`
			Audit  auditInfo `json:"audit"`
		}
		if json.Unmarshal(v, &s) != nil {
			return false
		}
		return (opts.Status == "" || s.Status == opts.Status) && (opts.AllOwners || s.Audit.Caller == opts.Owner)
	}
	page, next, err := e.st.List(ctx, store.ListOptions{Cursor: opts.Cursor, Limit: limit, Match: match})
	if errors.Is(err, store.ErrBadCursor) {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err != nil {
		return nil, "", fmt.Errorf("engine: listing executions: %w", err)
	}
	out := make([]*Execution, 0, len(page))
	for _, ent := range page {
		var r record
		if err := json.Unmarshal(ent.Value, &r); err != nil {
			return nil, "", fmt.Errorf("engine: decoding record %s: %w", ent.Key, err)
		}
		out = append(out, &r.Execution)
	}
	return out, next, nil
}
