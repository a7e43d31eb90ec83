package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SnapshotsBucket is the object store of sessions' snapshots: any node of a
// fleet reads what another stored. Unlike artifacts they have no TTL:
// they are kept until their owner (or the session they keep) deletes
// them, and eviction never counts nor removes them.
const SnapshotsBucket = "PYEXEC_SNAPSHOTS"

// SnapshotInfo describes one stored snapshot by the labels its writer gave
// it; the store never reads the snapshot itself.
type SnapshotInfo struct {
	ID      string
	Owner   string // the API key's name that owns it
	Kind    string // who made it and why (the engine's words)
	Session string // the session it was made of
	Created time.Time
	// Labels are the writer's other words on it (at most a few KiB).
	Labels map[string]string
	// Size is the stored bytes (filled in by the store).
	Size int64
}

// Snapshots stores session snapshots by id. Objects are chunked (128 KiB
// a message), so a snapshot's size is not bound by the server's
// max_payload; a Put whose reader fails stores nothing.
type Snapshots interface {
	PutSnapshot(ctx context.Context, info SnapshotInfo, r io.Reader) (SnapshotInfo, error)
	// GetSnapshot opens a stored snapshot; ErrNotFound when there is none.
	// The caller closes the reader.
	GetSnapshot(ctx context.Context, id string) (io.ReadCloser, SnapshotInfo, error)
	// StatSnapshot describes one; ErrNotFound when there is none.
	StatSnapshot(ctx context.Context, id string) (SnapshotInfo, error)
	// ListSnapshots describes every stored snapshot, in no set order.
	ListSnapshots(ctx context.Context) ([]SnapshotInfo, error)
	// DeleteSnapshot removes one; a missing one is not an error.
	DeleteSnapshot(ctx context.Context, id string) error
}

var _ Snapshots = (*NATS)(nil)

func (s *NATS) openSnapshots(ctx context.Context) (err error) {
	s.snapshots, err = s.openObjects(ctx, SnapshotsBucket, "pyexec snapshots of sessions", 0)
	return err
}

// Object metadata keys of a snapshot; the writer's labels are stored
// under metaLabel + their name.
const (
	metaOwner   = "pyexec-owner"
	metaKind    = "pyexec-kind"
	metaSession = "pyexec-session"
	metaCreated = "pyexec-created"
	metaLabel   = "pyexec-label-"
)

// maxLabels bounds the labels of one snapshot: they travel in the object's
// meta message, under the server's max_payload.
const maxLabels = 64 << 10

// PutSnapshot stores the snapshot r reads under info.ID.
func (s *NATS) PutSnapshot(ctx context.Context, info SnapshotInfo, r io.Reader) (SnapshotInfo, error) {
	if info.ID == "" || info.Owner == "" {
		return SnapshotInfo{}, errors.New("store: a snapshot needs an id and an owner")
	}
	meta := map[string]string{metaOwner: info.Owner, metaKind: info.Kind, metaSession: info.Session,
		metaCreated: info.Created.UTC().Format(time.RFC3339Nano)}
	n := 0
	for k, v := range info.Labels {
		if n += len(k) + len(v); n > maxLabels {
			return SnapshotInfo{}, fmt.Errorf("store: the labels of snapshot %s are over %d bytes", info.ID, maxLabels)
		}
		meta[metaLabel+k] = v
	}
	oi, err := s.snapshots.Put(ctx, jetstream.ObjectMeta{Name: info.ID, Metadata: meta}, r)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("store: storing snapshot %s: %w", info.ID, mapErr(err))
	}
	return snapshotOf(oi), nil
}

// GetSnapshot opens a stored snapshot.
func (s *NATS) GetSnapshot(ctx context.Context, id string) (io.ReadCloser, SnapshotInfo, error) {
	res, err := s.snapshots.Get(ctx, id)
	if err != nil {
		return nil, SnapshotInfo{}, fmt.Errorf("store: reading snapshot %s: %w", id, snapshotErr(err))
	}
	oi, err := res.Info()
	if err != nil {
		res.Close()
		return nil, SnapshotInfo{}, fmt.Errorf("store: reading snapshot %s: %w", id, mapErr(err))
	}
	return res, snapshotOf(oi), nil
}

// StatSnapshot describes one stored snapshot.
func (s *NATS) StatSnapshot(ctx context.Context, id string) (SnapshotInfo, error) {
	oi, err := s.snapshots.GetInfo(ctx, id)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("store: reading snapshot %s: %w", id, snapshotErr(err))
	}
	return snapshotOf(oi), nil
}

// ListSnapshots describes every stored snapshot.
func (s *NATS) ListSnapshots(ctx context.Context) ([]SnapshotInfo, error) {
	infos, err := s.snapshots.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: listing snapshots: %w", mapErr(err))
	}
	out := make([]SnapshotInfo, 0, len(infos))
	for _, oi := range infos {
		if !oi.Deleted {
			out = append(out, snapshotOf(oi))
		}
	}
	return out, nil
}

// DeleteSnapshot removes one stored snapshot.
func (s *NATS) DeleteSnapshot(ctx context.Context, id string) error {
	err := s.snapshots.Delete(ctx, id)
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) && !errors.Is(err, jetstream.ErrNameRequired) {
		return fmt.Errorf("store: deleting snapshot %s: %w", id, mapErr(err))
	}
	return nil
}

// snapshotErr maps a failed lookup: an id no object could have is not
// found, as an unknown one.
func snapshotErr(err error) error {
	if errors.Is(err, jetstream.ErrNameRequired) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return mapErr(err)
}

func snapshotOf(oi *jetstream.ObjectInfo) SnapshotInfo {
	m := oi.Metadata
	info := SnapshotInfo{ID: oi.Name, Owner: m[metaOwner], Kind: m[metaKind], Session: m[metaSession], Size: int64(oi.Size)}
	info.Created, _ = time.Parse(time.RFC3339Nano, m[metaCreated])
	for k, v := range m {
		if name, ok := cutLabel(k); ok {
			if info.Labels == nil {
				info.Labels = make(map[string]string)
			}
			info.Labels[name] = v
		}
	}
	return info
}

func cutLabel(k string) (string, bool) {
	if len(k) <= len(metaLabel) || k[:len(metaLabel)] != metaLabel {
		return "", false
	}
	return k[len(metaLabel):], true
}
