package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/store"
)

// Record is what the engine stores per execution: the wire Execution plus
// what it needs to run, recover and audit it.
type Record struct {
	run.Execution
	// Async executions live in the work queue until a worker starts them.
	Async bool `json:"async,omitempty"`
	// Audit holds who asked and what was asked, so the audit record can be
	// written by whoever ends the execution.
	Audit auditInfo `json:"audit"`
	// Output says where stdout and stderr are kept when not in the record
	// itself (output_once.go).
	Output *outputRef `json:"output,omitempty"`
	// rev is the store revision of this record as this engine wrote it (0:
	// unknown). Not stored: it lets the outcome replace the record this
	// engine created without reading it back first (recordOutcome).
	rev uint64
}

// Owner is the caller that created the execution (the API key's name).
func (r *Record) Owner() string { return r.Audit.Caller }

// meta is the index entry of r: what listings filter on.
func (r *Record) meta() store.Meta {
	return store.Meta{Status: string(r.Status), Owner: r.Audit.Caller, Final: r.Status.Final(), Async: r.Async}
}

// encode is the stored form of r: without stdout and stderr when they are
// kept in the events.
func (r *Record) encode() ([]byte, error) {
	v := r
	if r.Output != nil {
		c := *r
		c.Stdout, c.Stderr = "", ""
		v = &c
	}
	// The outputs are written in their fast form (rich_encode.go): the
	// field at the outer level hides Execution's (it moves to the end of
	// the object, which decoding does not mind).
	b, err := json.Marshal(struct {
		*Record
		Outputs []run.FastOutput `json:"outputs,omitempty"`
	}{v, run.FastOutputs(v.Outputs)})
	if err != nil {
		return nil, fmt.Errorf("engine: encoding record %s: %w", r.ID, err)
	}
	return b, nil
}

// auditInfo is the request side of an audit record.
type auditInfo struct {
	Caller     string          `json:"caller,omitempty"`
	ClientAddr string          `json:"client_addr,omitempty"`
	CodeSHA256 string          `json:"code_sha256"`
	Limits     run.AuditLimits `json:"limits"`
}

// newID returns "exe_" + a UUIDv7. Version 7 ids sort by creation time,
// which is what lets the store list records newest first by key.
func newID() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("engine: generating an id: %w", err)
	}
	return idPrefix + u.String(), nil
}

// idPrefix starts every execution id.
const idPrefix = "exe_"

// wellFormedID reports whether id has the form newID gives: the prefix
// and a UUID in its canonical spelling. Nothing else can name a record, so
// anything else is answered as unknown before it reaches the store, whose
// keys and subjects it might not be valid in (a space, "*" or ">").
func wellFormedID(id string) bool {
	rest, ok := strings.CutPrefix(id, idPrefix)
	if !ok {
		return false
	}
	u, err := uuid.Parse(rest)
	return err == nil && u.String() == rest
}

// newRecord is a pending execution of req.
func newRecord(id string, req run.Request, p *run.Plan, async bool) *Record {
	return &Record{
		Execution: run.Execution{
			ID:            id,
			Status:        run.StatusPending,
			PythonVersion: p.Interpreter.Version,
			Warnings:      p.Env.Warnings,
			CreatedAt:     run.Now(),
		},
		Async: async,
		Audit: auditInfo{
			Caller:     req.Caller,
			ClientAddr: req.ClientAddr,
			CodeSHA256: codeHash(req.Files),
			Limits:     p.Limits,
		},
	}
}

func (e *Service) create(ctx context.Context, r *Record) error {
	b, err := r.encode()
	if err != nil {
		return err
	}
	rev, err := e.st.Create(ctx, r.ID, b, r.meta())
	if err != nil && !e.indexLag(r.ID, err) {
		return fmt.Errorf("engine: creating record: %w", err)
	}
	r.rev = rev
	return nil
}

// indexLag reports whether err says only that the index entry of a
// record just written was not: the record is stored, and the listing that
// meets the stale entry repairs it.
func (e *Service) indexLag(id string, err error) bool {
	if !errors.Is(err, store.ErrIndex) {
		return false
	}
	e.log.Warn("record written without its index entry", "execution_id", id, "err", err)
	return true
}

// Load reads the record of id; run.ErrNotFound when there is none (or it
// expired). It does not check who asks: the engine does, with Owner.
func (e *Service) Load(ctx context.Context, id string) (*Record, error) {
	r, _, err := e.load(ctx, id)
	return r, err
}

// load reads a record and its revision; ErrNotFound when there is none.
func (e *Service) load(ctx context.Context, id string) (*Record, uint64, error) {
	if !wellFormedID(id) {
		return nil, 0, fmt.Errorf("%w: %q", run.ErrNotFound, id)
	}
	ent, err := e.st.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, fmt.Errorf("%w: %s", run.ErrNotFound, id)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("engine: loading %s: %w", id, err)
	}
	var r Record
	if err := json.Unmarshal(ent.Value, &r); err != nil {
		return nil, 0, fmt.Errorf("engine: decoding record %s: %w", id, err)
	}
	return &r, ent.Revision, nil
}

// update writes r if rev is still its latest revision; store.ErrConflict
// otherwise. A record too large for the store (output that JSON-escapes
// badly) is written with its output cut down until it fits. Once written,
// r.rev is the revision it was written at.
func (e *Service) update(ctx context.Context, r *Record, rev uint64) error {
	for {
		b, err := r.encode()
		if err != nil {
			return err
		}
		wrote, err := e.st.Update(ctx, r.ID, b, rev, r.meta())
		if err == nil || e.indexLag(r.ID, err) {
			r.rev = wrote
			return nil
		}
		if errors.Is(err, store.ErrTooLarge) && (r.Stdout != "" || r.Stderr != "") {
			r.Stdout, r.StdoutTruncated = halve(r.Stdout, r.StdoutTruncated)
			r.Stderr, r.StderrTruncated = halve(r.Stderr, r.StderrTruncated)
			continue
		}
		return fmt.Errorf("engine: writing record: %w", err)
	}
}

func halve(s string, truncated bool) (string, bool) {
	if s == "" {
		return s, truncated
	}
	return s[:len(s)/2], true
}

// transition applies change to the latest version of a record and writes
// it, re-reading and re-applying on a concurrent write. change returns
// false to leave the record as it is. It returns the record as stored and
// whether change wrote it (with the revision it wrote, so that the
// outcome can replace it with no read first, see recordOutcome).
func (e *Service) transition(ctx context.Context, id string, change func(*Record) bool) (*Record, bool, error) {
	return e.transitionFrom(ctx, id, nil, change)
}

// transitionFrom is transition from known, the record as this engine
// wrote it at known.rev (nil or 0: unknown): change is applied to a copy
// of it and written there with no read first. Only when someone wrote the
// record since (or change refuses the copy) is the latest version read,
// as transition does.
func (e *Service) transitionFrom(ctx context.Context, id string, known *Record, change func(*Record) bool) (*Record, bool, error) {
	if known != nil && known.rev != 0 {
		r := *known
		if change(&r) {
			err := e.update(ctx, &r, known.rev)
			if err == nil {
				return &r, true, nil
			}
			if !errors.Is(err, store.ErrConflict) {
				return nil, false, err
			}
		}
	}
	for {
		r, rev, err := e.load(ctx, id)
		if err != nil {
			return nil, false, err
		}
		if !change(r) {
			return r, false, nil
		}
		err = e.update(ctx, r, rev)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		return r, true, nil
	}
}
