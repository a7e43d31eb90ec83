package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// TestSnapshotsRoundTripAndSurviveRestart: a snapshot larger than a chunk
// comes back byte for byte with its labels, is listed and described,
// survives a restart of the store's server, and is gone once deleted.
func TestSnapshotsRoundTripAndSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, emb := open(t, dir, Config{})
	data := bytes.Repeat([]byte{7, 0, 0xff, 1}, (1<<20)/4+3) // several object chunks
	created := time.Date(2026, 11, 29, 10, 0, 0, 123, time.UTC)
	info := SnapshotInfo{ID: "snap_a", Owner: "alice", Kind: "user", Session: "ses_1", Created: created,
		Labels: map[string]string{"python": "3.11", "execution_count": "4"}}
	put, err := s.PutSnapshot(ctx, info, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if put.Size != int64(len(data)) {
		t.Errorf("stored %d bytes, want %d", put.Size, len(data))
	}
	// A put whose reader fails leaves nothing behind.
	if _, err := s.PutSnapshot(ctx, SnapshotInfo{ID: "snap_b", Owner: "bob"}, io.MultiReader(bytes.NewReader(data[:1000]),
		errReader{})); err == nil {
		t.Error("a put whose reader failed succeeded")
	}
	if _, err := s.StatSnapshot(ctx, "snap_b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the failed put: %v, want ErrNotFound", err)
	}
	if err := emb.Close(); err != nil {
		t.Fatal(err)
	}

	s, _ = open(t, dir, Config{})
	rc, got, err := s.GetSnapshot(ctx, "snap_a")
	if err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("read back %d bytes (%v), want the %d stored", len(b), err, len(data))
	}
	if got.Owner != "alice" || got.Kind != "user" || got.Session != "ses_1" || !got.Created.Equal(created) ||
		got.Labels["python"] != "3.11" || got.Labels["execution_count"] != "4" || got.Size != int64(len(data)) {
		t.Errorf("described as %+v", got)
	}
	list, err := s.ListSnapshots(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "snap_a" {
		t.Fatalf("listed %+v, %v", list, err)
	}
	if err := s.DeleteSnapshot(ctx, "snap_a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSnapshot(ctx, "snap_a"); err != nil {
		t.Errorf("deleting a missing snapshot: %v", err)
	}
	if _, _, err := s.GetSnapshot(ctx, "snap_a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after delete: %v, want ErrNotFound", err)
	}
	if list, err := s.ListSnapshots(ctx); err != nil || len(list) != 0 {
		t.Errorf("after delete listed %+v, %v", list, err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("the kernel died") }
