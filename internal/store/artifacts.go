package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// ArtifactsBucket is the object store of the files executions produce.
const ArtifactsBucket = "PYEXEC_ARTIFACTS"

// Artifact describes one stored file of an execution.
type Artifact struct {
	Path   string // workspace-relative, slash-separated
	Size   int64
	SHA256 string // hex
	MIME   string
}

// Artifacts stores the files executions produce, by execution id and
// workspace-relative path. They expire with the records (Config.TTL).
type Artifacts interface {
	// PutArtifact stores data as the file path of execution id.
	PutArtifact(ctx context.Context, id, path, mime string, data []byte) (Artifact, error)
	// GetArtifact opens a stored file; ErrNotFound when there is none.
	// The caller closes the reader.
	GetArtifact(ctx context.Context, id, path string) (io.ReadCloser, Artifact, error)
	// ListArtifacts lists the files of execution id, in no set order.
	ListArtifacts(ctx context.Context, id string) ([]Artifact, error)
}

var _ Artifacts = (*NATS)(nil)

func (s *NATS) openArtifacts(ctx context.Context) (err error) {
	s.artifacts, err = s.openObjects(ctx, ArtifactsBucket, "pyexec files produced by executions", s.cfg.TTL)
	return err
}

// artifactName is the object name of a file: the id cannot contain "/",
// so the prefix "id/" separates executions.
func artifactName(id, path string) string { return id + "/" + path }

// Object metadata keys.
const (
	metaPath   = "pyexec-path"
	metaSHA256 = "pyexec-sha256"
	metaMIME   = "pyexec-mime"
)

// PutArtifact stores one file; the object store chunks it.
func (s *NATS) PutArtifact(ctx context.Context, id, path, mime string, data []byte) (Artifact, error) {
	if id == "" || strings.Contains(id, "/") || path == "" {
		return Artifact{}, fmt.Errorf("store: invalid artifact %q of %q", path, id)
	}
	sum := sha256.Sum256(data)
	a := Artifact{Path: path, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), MIME: mime}
	meta := jetstream.ObjectMeta{
		Name: artifactName(id, path),
		Metadata: map[string]string{
			metaPath: path, metaSHA256: a.SHA256, metaMIME: mime,
		},
	}
	if _, err := s.artifacts.Put(ctx, meta, bytes.NewReader(data)); err != nil {
		return Artifact{}, fmt.Errorf("store: storing artifact %s of %s: %w", path, id, mapErr(err))
	}
	return a, nil
}

// GetArtifact opens one stored file.
func (s *NATS) GetArtifact(ctx context.Context, id, path string) (io.ReadCloser, Artifact, error) {
	res, err := s.artifacts.Get(ctx, artifactName(id, path))
	if err != nil {
		return nil, Artifact{}, fmt.Errorf("store: reading artifact %s of %s: %w", path, id, mapErr(err))
	}
	info, err := res.Info()
	if err != nil {
		res.Close()
		return nil, Artifact{}, fmt.Errorf("store: reading artifact %s of %s: %w", path, id, mapErr(err))
	}
	return res, artifactOf(info), nil
}

// ListArtifacts lists the files of one execution.
func (s *NATS) ListArtifacts(ctx context.Context, id string) ([]Artifact, error) {
	infos, err := s.artifacts.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: listing artifacts of %s: %w", id, mapErr(err))
	}
	var out []Artifact
	for _, info := range infos {
		if strings.HasPrefix(info.Name, id+"/") && !info.Deleted {
			out = append(out, artifactOf(info))
		}
	}
	return out, nil
}

func artifactOf(info *jetstream.ObjectInfo) Artifact {
	m := info.Metadata
	return Artifact{Path: m[metaPath], Size: int64(info.Size), SHA256: m[metaSHA256], MIME: m[metaMIME]}
}
