package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"
)

// The fleet's store of record: records in a KV bucket, blobs in an object
// store (which chunks them), both on the JetStream every node shares.

// Buckets of the fleet store.
const (
	RecordsBucket = "PYEXEC_WORKSPACES"
	BlobsBucket   = "PYEXEC_WORKSPACE_BLOBS"
)

// kvRecords keeps records in a JetStream KV bucket.
type kvRecords struct{ kv jetstream.KeyValue }

var _ records = kvRecords{}

// objectBlobs keeps blobs in a JetStream object store, one object per
// blob named by its hash.
type objectBlobs struct{ obs jetstream.ObjectStore }

var _ blobStore = objectBlobs{}

// Buckets opens the fleet's buckets, creating them when absent, with the
// store's replicas and its leader reads, and waiting while the cluster
// cannot answer yet; *store.NATS implements it.
type Buckets interface {
	OpenBucket(ctx context.Context, bucket, description string) (jetstream.KeyValue, error)
	OpenObjectBucket(ctx context.Context, bucket, description string) (jetstream.ObjectStore, error)
}

// openNATS opens the fleet store's buckets through b.
func openNATS(ctx context.Context, b Buckets) (kvRecords, objectBlobs, error) {
	kv, err := b.OpenBucket(ctx, RecordsBucket, "pyexec workspaces and their versions")
	if err != nil {
		return kvRecords{}, objectBlobs{}, fmt.Errorf("opening the workspace records bucket: %w", err)
	}
	obs, err := b.OpenObjectBucket(ctx, BlobsBucket, "pyexec workspace file contents and manifest pages, by SHA-256")
	if err != nil {
		return kvRecords{}, objectBlobs{}, fmt.Errorf("opening the workspace blobs bucket: %w", err)
	}
	return kvRecords{kv}, objectBlobs{obs}, nil
}

func (r kvRecords) get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := r.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("%w: record %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading record %s: %w", key, err)
	}
	return e.Value(), e.Revision(), nil
}

func (r kvRecords) create(ctx context.Context, key string, val []byte) (uint64, error) {
	rev, err := r.kv.Create(ctx, key, val)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, fmt.Errorf("%w: record %s", ErrExists, key)
	}
	if err != nil {
		return 0, fmt.Errorf("creating record %s: %w", key, err)
	}
	return rev, nil
}

func (r kvRecords) update(ctx context.Context, key string, val []byte, rev uint64) (uint64, error) {
	n, err := r.kv.Update(ctx, key, val, rev)
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, fmt.Errorf("%w: record %s", errRevision, key)
	}
	if err != nil {
		return 0, fmt.Errorf("updating record %s: %w", key, err)
	}
	return n, nil
}

func (r kvRecords) put(ctx context.Context, key string, val []byte) error {
	if _, err := r.kv.Put(ctx, key, val); err != nil {
		return fmt.Errorf("writing record %s: %w", key, err)
	}
	return nil
}

func (r kvRecords) remove(ctx context.Context, key string) error {
	// Purge, not Delete: a deleted workspace leaves no tombstone per
	// version behind.
	if err := r.kv.Purge(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("removing record %s: %w", key, err)
	}
	return nil
}

func (r kvRecords) keys(ctx context.Context, prefix string) ([]string, error) {
	l, err := r.kv.ListKeysFiltered(ctx, prefix+">")
	if err != nil {
		return nil, fmt.Errorf("listing records %s: %w", prefix, err)
	}
	var out []string
	for k := range l.Keys() {
		out = append(out, k)
	}
	// The lister stops itself after the last key, or early when ctx ends:
	// then the list is short, and that is an error.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing records %s: %w", prefix, err)
	}
	return out, nil
}

func (b objectBlobs) has(ctx context.Context, hash string) (bool, error) {
	info, err := b.obs.GetInfo(ctx, hash)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking up blob %s: %w", hash, err)
	}
	// Rewriting the object's description starts its age again, so the
	// collector (which spares young blobs) does not take it while the
	// commit that found it is under way.
	if err := b.obs.UpdateMeta(ctx, hash, info.ObjectMeta); err != nil {
		return false, fmt.Errorf("touching blob %s: %w", hash, err)
	}
	return true, nil
}

func (b objectBlobs) put(ctx context.Context, hash string, r io.Reader) error {
	if _, err := b.obs.Put(ctx, jetstream.ObjectMeta{Name: hash}, r); err != nil {
		return fmt.Errorf("storing blob %s: %w", hash, err)
	}
	return nil
}

func (b objectBlobs) get(ctx context.Context, hash string, w io.Writer) error {
	res, err := b.obs.Get(ctx, hash)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("%w: blob %s", ErrNotFound, hash)
	}
	if err != nil {
		return fmt.Errorf("fetching blob %s: %w", hash, err)
	}
	defer res.Close()
	if _, err := io.Copy(w, res); err != nil {
		return fmt.Errorf("fetching blob %s: %w", hash, err)
	}
	return nil
}

func (b objectBlobs) list(ctx context.Context) ([]storedBlob, error) {
	infos, err := b.obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing blobs: %w", err)
	}
	out := make([]storedBlob, 0, len(infos))
	for _, i := range infos {
		if !i.Deleted {
			out = append(out, storedBlob{Hash: i.Name, Size: int64(i.Size), ModTime: i.ModTime})
		}
	}
	return out, nil
}

func (b objectBlobs) remove(ctx context.Context, hash string) error {
	if err := b.obs.Delete(ctx, hash); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("removing blob %s: %w", hash, err)
	}
	return nil
}

func (b objectBlobs) size(ctx context.Context) (int64, error) {
	st, err := b.obs.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the blobs bucket's size: %w", err)
	}
	return int64(st.Size()), nil
}
