package store

import (
	"context"
	"time"
)

// Entry is one stored value with the revision that a later Update must
// name.
type Entry struct {
	Key      string
	Value    []byte
	Revision uint64
}

// ListOptions page through records, most recently created first. Keys
// must sort by creation time (the engine uses UUIDv7 ids). Status, Owner
// and AllOwners select by the records' index entries (Meta), without
// reading the records left out.
type ListOptions struct {
	// Cursor is the opaque next value of the previous page; empty starts at
	// the newest record.
	Cursor string
	// Limit is the page size; it must be positive.
	Limit int
	// Status, when set, keeps only records whose Meta.Status is equal.
	Status string
	// Owner keeps only records whose Meta.Owner is equal, unless AllOwners.
	Owner     string
	AllOwners bool
	// Match, when set, checks each record read: an index entry may lag
	// behind its record (see Update), so a caller that needs the filter
	// exact checks the values too.
	Match func(value []byte) bool
}

// Records stores one value per key with compare-and-set updates, and an
// index entry (Meta) per value that listings filter on.
type Records interface {
	// Create stores a new value; ErrExists when the key is taken.
	Create(ctx context.Context, key string, value []byte, meta Meta) (revision uint64, err error)
	// Get returns the latest value; ErrNotFound when there is none.
	Get(ctx context.Context, key string) (Entry, error)
	// Update replaces the value if revision is still the latest;
	// ErrConflict otherwise. An error wrapping ErrIndex comes with the new
	// revision: the value was written, its index entry was not.
	Update(ctx context.Context, key string, value []byte, revision uint64, meta Meta) (uint64, error)
	// Delete removes a value and its index entry.
	Delete(ctx context.Context, key string) error
	// List returns a page of entries and the cursor of the next page
	// ("" when there is none).
	List(ctx context.Context, opts ListOptions) (entries []Entry, next string, err error)
	// SetMeta rewrites the index entry of a value.
	SetMeta(ctx context.Context, key string, meta Meta) error
	// Reindex writes the index entries missing from the index (records of
	// an older data directory), with the Meta describe derives.
	Reindex(ctx context.Context, describe func(key string, value []byte) (Meta, error)) (int, error)
}

// Requests stores request payloads, which may be several megabytes.
type Requests interface {
	PutRequest(ctx context.Context, id string, data []byte) error
	// GetRequest returns ErrNotFound when the payload is gone.
	GetRequest(ctx context.Context, id string) ([]byte, error)
	DeleteRequest(ctx context.Context, id string) error
}

// Job is one message taken from the work queue. Until it is acked it stays
// in the queue and is redelivered after the ack wait.
type Job interface {
	ID() string
	// Ack removes the job from the queue for good.
	Ack(ctx context.Context) error
	// Nak hands the job back at once, for another worker to take.
	Nak() error
}

// Queue is the durable queue of async executions shared by every worker:
// one subject and one durable consumer per key, so a worker chooses whose
// job it takes next.
type Queue interface {
	// Enqueue appends job id to the queue of key.
	Enqueue(ctx context.Context, key, id string) error
	// TakeJob takes key's next job without waiting; it returns (nil, nil)
	// when key has none available.
	TakeJob(ctx context.Context, key string) (Job, error)
	// DropJob removes job id of key from the queue, if it is there.
	DropJob(ctx context.Context, key, id string) error
	// QueueDepth counts the jobs not yet acked.
	QueueDepth(ctx context.Context) (uint64, error)
	// QueuedIDs lists the ids of the jobs not yet acked, oldest first.
	QueuedIDs(ctx context.Context) ([]string, error)
	// MigrateQueue moves the jobs of an earlier version's single queue to
	// their keys' queues (after Reindex, before taking jobs).
	MigrateQueue(ctx context.Context) (int, error)
	// RequeueHeld makes the jobs taken and not acked available again at
	// once (single node only: see the implementation).
	RequeueHeld(ctx context.Context) (int, error)
}

// EventMsg is one stored event of an execution.
type EventMsg struct {
	// Seq is the position of the event among those of its execution,
	// starting at 1 without gaps.
	Seq  uint64
	Data []byte
	Time time.Time
	// StreamSeq orders events across executions; compare it with LastEvent.
	StreamSeq uint64
}

// Events publishes an execution's events and replays them.
type Events interface {
	PublishEvent(ctx context.Context, id string, data []byte) error
	// PublishEvents appends several events in order, awaited together.
	PublishEvents(ctx context.Context, id string, data [][]byte) error
	// FollowEvents delivers every stored event of id from the first one,
	// then new ones as they are published, until ctx ends; then the
	// channel is closed.
	FollowEvents(ctx context.Context, id string) (<-chan EventMsg, error)
	// LastEvent returns the StreamSeq of the newest event of id, 0 when
	// there is none.
	LastEvent(ctx context.Context, id string) (uint64, error)
}

// ControlHandler answers a control message addressed to one execution.
type ControlHandler func(data []byte) (reply []byte)

// Control carries requests (kill) to whichever node runs an execution.
type Control interface {
	// HandleControl makes this node the owner of id until stop is called.
	HandleControl(id string, h ControlHandler) (stop func() error, err error)
	// SendControl asks the owner of id and returns its reply; ErrNoOwner
	// when no node owns it.
	SendControl(ctx context.Context, id string, data []byte) ([]byte, error)
}

// Audit appends to the audit trail.
type Audit interface {
	AppendAudit(ctx context.Context, data []byte) error
}

// MemberEvent is one change of the membership bucket seen by a watcher.
type MemberEvent struct {
	Entry
	// Deleted says the entry was removed (a node that left, or one a
	// survivor declared lost); Value is empty then.
	Deleted bool
	// Synced marks the end of the entries that existed when the watch
	// began; every event after it is a change. Entry is empty.
	Synced bool
}

// Members keeps one heartbeat entry per node of a fleet, keyed by node
// name. Entries expire by themselves when their node stops writing them.
type Members interface {
	// CreateMember writes name's first entry; ErrExists when a live entry
	// is there.
	CreateMember(ctx context.Context, name string, value []byte) (revision uint64, err error)
	// UpdateMember replaces name's entry if revision is still its latest
	// one; ErrConflict otherwise.
	UpdateMember(ctx context.Context, name string, value []byte, revision uint64) (uint64, error)
	// PutMember writes name's entry whatever is there.
	PutMember(ctx context.Context, name string, value []byte) (revision uint64, err error)
	// GetMember returns name's entry; ErrNotFound when there is none.
	GetMember(ctx context.Context, name string) (Entry, error)
	// RemoveMember deletes name's entry if revision is still its latest
	// one, ErrConflict otherwise: of several nodes that try to remove the
	// same entry, exactly one succeeds.
	RemoveMember(ctx context.Context, name string, revision uint64) error
	// WatchMembers delivers every current entry, then an event with
	// Synced, then every change, until ctx ends; then the channel is
	// closed.
	WatchMembers(ctx context.Context) (<-chan MemberEvent, error)
}
