package fleetsess

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/store"
)

// Engine is this node's session API; *engine.Engine implements it.
type Engine interface {
	CreateSession(ctx context.Context, req engine.SessionRequest) (engine.Session, error)
	GetSession(ctx context.Context, id string, c engine.Caller) (engine.Session, error)
	ListSessions(ctx context.Context, c engine.Caller) []engine.Session
	DeleteSession(ctx context.Context, id string, c engine.Caller) error
	ExecuteCell(ctx context.Context, id string, c engine.Caller, req engine.CellRequest) (engine.CellResult, error)
	InterruptSession(ctx context.Context, id string, c engine.Caller) error
	RestartSession(ctx context.Context, id string, c engine.Caller) (engine.Session, error)
	PutSessionFile(ctx context.Context, id string, c engine.Caller, path string, data []byte) error
	ListSessionFiles(ctx context.Context, id string, c engine.Caller) ([]engine.SessionFile, error)
	ReadSessionFile(ctx context.Context, id string, c engine.Caller, path string) ([]byte, error)
	SnapshotSession(ctx context.Context, id string, c engine.Caller) (engine.SessionSaved, error)
	ForkSession(ctx context.Context, id string, c engine.Caller) (engine.Session, error)
	ListSnapshots(ctx context.Context, c engine.Caller) ([]engine.SnapshotInfo, error)
	DeleteSnapshot(ctx context.Context, id string, c engine.Caller) error
	// AdoptSession takes back a session an earlier run of this node
	// saved at its shutdown: it reads its snapshot, never builds its
	// environment (its first call does), so Start is not held by one.
	AdoptSession(ctx context.Context, p engine.ParkedSession, created, expires time.Time) (engine.Session, error)
	// SweepHibernations deletes the hibernation snapshots orphan gives a
	// reason for, except those this node's sessions hibernate in.
	SweepHibernations(ctx context.Context, orphan func(engine.SnapshotInfo) string) (int, error)
	// ShareSessionPort and RevokeSessionPort issue and revoke a preview
	// URL of a session's port; the share is kept by the engine that
	// issued it.
	ShareSessionPort(ctx context.Context, id string, c engine.Caller, port int) (engine.PortShare, error)
	RevokeSessionPort(ctx context.Context, id string, c engine.Caller, port int) (int, error)
	// FenceSessions ends every local session without touching the
	// registry or their snapshots (this node was declared lost).
	FenceSessions() []string
	// NodeAlive says whether the fleet's membership still counts node as
	// alive (it has not declared it lost).
	NodeAlive(node string) bool
	// LiveSessions and SessionCap say whether this node has a free slot.
	LiveSessions() int
	SessionCap() int
}

var _ Engine = (*engine.Engine)(nil)

// Reasons a session ended without being deleted, as the registry and the
// 410 answer name them.
const (
	ReasonNodeLost     = "node_lost"
	ReasonNodeShutdown = "node_shutdown"
)

var reasonText = map[string]string{
	ReasonNodeLost:     "the node running this session stopped",
	ReasonNodeShutdown: "the node running this session shut down",
}

// Config wires a Router.
type Config struct {
	// Node is this node's name in the fleet (a NATS subject token).
	Node string
	// Conn is the connection to the fleet's NATS.
	Conn *nats.Conn
	// Registry records which node holds each session.
	Registry store.SessionRegistry
	// Blobs carries messages larger than the server's max_payload (file
	// uploads and downloads, large cell outputs).
	Blobs store.Requests
	// NodeURL is the URL a live node of the fleet advertises (the
	// membership registry's): where previews of its sessions are relayed.
	// Nil: previews reach only this node's sessions.
	NodeURL func(node string) (string, error)
	// Nodes names the live nodes of the fleet (the membership
	// registry's), among which a preview URL's issuer is found.
	Nodes func() []string
	// CheckEvery is how often a forwarded request that waits for its
	// answer checks that the node holding the session is still there.
	// Zero means 1s.
	CheckEvery time.Duration
	// The sweep of hibernation snapshots (sweep.go): SweepEvery is how
	// often it runs (zero: 10m); ParkedFor how long a session parked by
	// its node's graceful shutdown waits for that node to take it back
	// (zero: 1h); OrphanAge how old a hibernation snapshot no session
	// names must be before it is deleted, longer than any save or resume
	// takes (zero: 15m).
	SweepEvery, ParkedFor, OrphanAge time.Duration
	// ClaimFor is how long a node's claim on a saved session it takes
	// back keeps the other nodes from taking it over (takeover.go): longer
	// than reading its snapshot takes (zero: 1m).
	ClaimFor time.Duration

	Logger *slog.Logger // nil discards
}

// Router serves the API's session calls for the whole fleet: it
// implements the API's session engine. Build it with New before the
// engine (its SessionEnded is the engine's Deps.OnSessionEnd), then Start
// it with the engine.
type Router struct {
	cfg Config
	log *slog.Logger
	eng Engine
	// instance is this run's fencing token (store.SessionEntry.Holder).
	instance string

	ctx    context.Context // ends at Close: handlers of other nodes' requests
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	closing  bool
	nodeSub  *nats.Subscription
	placeSub *nats.Subscription       // while this node has a free slot
	taking   map[string]chan struct{} // sessions this node is taking over; closed when done
	// cells are the counts of cells to write to the registry
	// (checkpoint.go); cellsDirty wakes their writer.
	cells      map[string]int
	cellsDirty chan struct{}
}

// registryTimeout bounds a registry write that no request waits for.
const registryTimeout = 5 * time.Second

// New checks cfg and returns a Router that is not serving yet.
func New(cfg Config) (*Router, error) {
	switch {
	case cfg.Node == "":
		return nil, errors.New("fleetsess: a node name is required")
	case cfg.Conn == nil || cfg.Registry == nil || cfg.Blobs == nil:
		return nil, errors.New("fleetsess: Conn, Registry and Blobs are required")
	}
	if cfg.CheckEvery == 0 {
		cfg.CheckEvery = time.Second
	}
	cfg.SweepEvery = cmp.Or(cfg.SweepEvery, 10*time.Minute)
	cfg.ParkedFor = cmp.Or(cfg.ParkedFor, time.Hour)
	cfg.OrphanAge = cmp.Or(cfg.OrphanAge, 15*time.Minute)
	cfg.ClaimFor = cmp.Or(cfg.ClaimFor, time.Minute)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("fleetsess: making the run's token: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Router{cfg: cfg, log: log, ctx: ctx, cancel: cancel, instance: hex.EncodeToString(b), taking: map[string]chan struct{}{},
		cells: map[string]int{}, cellsDirty: make(chan struct{}, 1)}, nil
}

// Start serves the requests of other nodes with eng. Sessions the
// registry still gives to this node are from an earlier process of the
// same name: those it saved at a graceful shutdown are adopted by eng
// (hibernated, resumed on their first call), the others died with it and
// are marked node_lost first.
func (r *Router) Start(ctx context.Context, eng Engine) error {
	r.eng = eng
	if err := r.endStale(ctx); err != nil {
		return err
	}
	sub, err := r.cfg.Conn.Subscribe(nodeSubject(r.cfg.Node), r.serveMsg)
	if err == nil {
		err = r.cfg.Conn.Flush() // the server knows the subscription before any session is created here
	}
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		return fmt.Errorf("fleetsess: subscribing to %s: %w", nodeSubject(r.cfg.Node), err)
	}
	r.mu.Lock()
	r.nodeSub = sub
	r.mu.Unlock()
	r.updatePlacement()
	r.wg.Add(3)
	go func() {
		defer r.wg.Done()
		r.placement()
	}()
	go func() {
		defer r.wg.Done()
		r.writeCells()
	}()
	go func() {
		defer r.wg.Done()
		r.sweeps()
	}()
	return nil
}

// Close stops serving other nodes and waits for the requests in hand.
// Call it after the engine's Close, so that requests waiting for a cell
// end with the session rather than hold the shutdown.
func (r *Router) Close() error {
	r.mu.Lock()
	r.closing = true
	var errs []error
	for _, sub := range []*nats.Subscription{r.nodeSub, r.placeSub} {
		if sub != nil {
			errs = append(errs, sub.Unsubscribe())
		}
	}
	r.nodeSub, r.placeSub = nil, nil
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	if err := errors.Join(errs...); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("fleetsess: unsubscribing: %w", err)
	}
	return nil
}

// SessionEnded keeps the registry in step with the engine
// (Deps.OnSessionEnd): a session that ended is removed, unless it ended
// because this node shuts down; then it stays, marked node_shutdown, so
// that its clients learn why.
func (r *Router) SessionEnded(id string, shutdown bool) {
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	var err error
	switch e, _, gerr := r.cfg.Registry.GetSession(ctx, id); {
	case gerr != nil:
		err = gerr
	case e.Node != r.cfg.Node:
		// another node took it over meanwhile: its entry is that node's
	case shutdown:
		_, err = r.markEnded(ctx, id, ReasonNodeShutdown)
	default:
		err = r.cfg.Registry.DeleteSession(ctx, id)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		r.log.Warn("updating the session registry", "session_id", id, "err", err)
	}
	if r.eng != nil {
		r.updatePlacement()
	}
}

// endStale settles the sessions the registry gives to an earlier run of
// this node that did not park them: those with a checkpoint are parked on
// it, the others marked lost; then it adopts the parked ones.
func (r *Router) endStale(ctx context.Context) error {
	n, err := r.endSessionsOf(ctx, r.cfg.Node)
	if n > 0 {
		r.log.Info("sessions of an earlier run of this node settled as lost (or to resume from their checkpoint)", "count", n)
	}
	r.adoptParked(ctx)
	return err
}

// adoptParked hands eng the sessions of this node saved at its last
// shutdown (takeOver); the registry then holds them as live again. One
// another node took over meanwhile is left to it. One whose snapshot
// cannot be read now stays parked, for the next sweep to try again
// (within ParkedFor); one that cannot be adopted for good ends
// (node_lost), and the sweep deletes its snapshot if eng did not.
func (r *Router) adoptParked(ctx context.Context) {
	list, err := r.cfg.Registry.ListSessions(ctx)
	if err != nil {
		r.log.Warn("reading the session registry for saved sessions", "err", err)
		return
	}
	for _, e := range list {
		if e.Node != r.cfg.Node || !parked(e, time.Now()) {
			continue
		}
		err := r.takeOver(ctx, e.ID, r.cfg.Node)
		if errors.Is(err, errMoved) {
			r.log.Info("a session saved at the last shutdown was taken over by another node", "session_id", e.ID)
		}
	}
}

// unpark clears the record that parked entry e, once its session was
// adopted; a park recorded since (this run's own shutdown) is kept. The
// checkpoint it resumed from is gone with the resume.
func (r *Router) unpark(ctx context.Context, parked store.SessionEntry) error {
	for {
		e, rev, err := r.cfg.Registry.GetSession(ctx, parked.ID)
		if err != nil {
			return err
		}
		if e.Hibernation != parked.Hibernation || !e.ParkedAt.Equal(parked.ParkedAt) || e.Node != r.cfg.Node {
			return nil
		}
		if e.Checkpoint == e.Hibernation {
			e.Checkpoint, e.CheckpointCells = "", 0
		}
		e.Hibernation, e.ParkedAt, e.TakenAt, e.FromCheckpoint, e.CellsLost = "", time.Time{}, time.Time{}, false, 0
		e.Holder = r.instance
		err = r.cfg.Registry.UpdateSession(ctx, e, rev)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
}

// SessionParked records that session p was saved at this node's shutdown
// (engine Deps.OnSessionPark): its entry stays live, naming its snapshot,
// for the node's next run.
// An error (the session is no longer this run's) leaves its checkpoint
// named, and the engine keeps it.
func (r *Router) SessionParked(p engine.ParkedSession) error {
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	err := r.updateOwn(ctx, p.ID, func(e *store.SessionEntry) bool {
		// the park is newer than its checkpoint, which the engine deletes
		e.Hibernation, e.ParkedAt, e.Checkpoint, e.CheckpointCells = p.Snapshot, time.Now(), "", 0
		return true
	})
	if err != nil {
		r.log.Warn("recording a session saved at shutdown", "session_id", p.ID, "err", err)
	}
	return err
}

// SelfLost fences this run (engine Deps.OnSelfLost): another node
// declared it lost, and may resume its sessions from their checkpoints.
// It ends every local session at once (the registry and the snapshots
// left as they are: they may be the new holder's), so that calls for
// them are forwarded to wherever the registry says they live; then those
// whose entries still name this run (the survivor did not settle them
// yet) are settled as a lost node's are: parked on their checkpoint, or
// ended node_lost.
func (r *Router) SelfLost() {
	ids := r.eng.FenceSessions()
	ctx, cancel := context.WithTimeout(r.ctx, registryTimeout)
	defer cancel()
	for _, id := range ids {
		err := r.lose(ctx, id, r.cfg.Node, r.instance)
		var ended *endedError
		if err != nil && !errors.Is(err, errMoved) && !errors.As(err, &ended) && !errors.Is(err, engine.ErrSessionNotFound) {
			r.log.Warn("settling a session this node stopped serving", "session_id", id, "err", err)
		}
	}
	if len(ids) > 0 {
		r.log.Warn("this node was declared lost: its sessions ended here, to resume from their checkpoints", "count", len(ids))
	}
	r.updatePlacement()
}

// NodeLost marks the sessions of a node the fleet declared lost
// (engine Deps.OnNodeLost): their clients get node_lost at once, also
// when the node hung with its NATS connection still open, where a
// forwarded call would otherwise wait for the client's timeout.
func (r *Router) NodeLost(node string) {
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	n, err := r.endSessionsOf(ctx, node)
	if err != nil {
		r.log.Warn("marking a lost node's sessions", "node", node, "err", err)
	}
	if n > 0 {
		r.log.Info("sessions of a lost node marked lost", "node", node, "count", n)
	}
}

// endSessionsOf settles the live sessions the registry gives to node as
// lost (lose: parked on their checkpoint, or ended) and returns how many
// it settled. Those parked by the node's graceful shutdown wait for it
// (the sweep ends them past ParkedFor).
func (r *Router) endSessionsOf(ctx context.Context, node string) (int, error) {
	list, err := r.cfg.Registry.ListSessions(ctx)
	if err != nil {
		return 0, fmt.Errorf("fleetsess: reading the session registry: %w", err)
	}
	n := 0
	for _, e := range list {
		if e.Node != node || e.Ended != "" || parked(e, time.Now()) {
			continue
		}
		err := r.lose(ctx, e.ID, node, "")
		var ended *endedError
		switch {
		case errors.Is(err, errMoved) || errors.As(err, &ended):
		case errors.Is(err, engine.ErrSessionNotFound):
			continue
		default:
			return n, fmt.Errorf("fleetsess: settling session %s of node %s: %w", e.ID, node, err)
		}
		n++
	}
	return n, nil
}

// markEnded records why id ended and returns the reason the registry
// keeps (an earlier one wins).
func (r *Router) markEnded(ctx context.Context, id, reason string) (string, error) {
	for {
		e, rev, err := r.cfg.Registry.GetSession(ctx, id)
		if err != nil {
			return "", err
		}
		if e.Ended != "" {
			return e.Ended, nil
		}
		e.Ended = reason
		err = r.cfg.Registry.UpdateSession(ctx, e, rev)
		if !errors.Is(err, store.ErrConflict) {
			return reason, err
		}
	}
}

// endedError is the answer for a session that ended with its node.
type endedError struct{ id, reason string }

func (e *endedError) Error() string {
	return fmt.Sprintf("session %s ended: %s: %s", e.id, e.reason, reasonText[e.reason])
}

func (e *endedError) Unwrap() error { return engine.ErrSessionEnded }

func notFound(id string) error { return fmt.Errorf("%w: %s", engine.ErrSessionNotFound, id) }

func newBlobName() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("fleetsess: naming a large message: %w", err)
	}
	return "sessionmsg_" + hex.EncodeToString(b), nil
}
