package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/store"
)

// heartbeatInterval is how often a node writes its heartbeat entry.
const heartbeatInterval = 2 * time.Second

// NodeInfo is one node's heartbeat: who it is and how busy it is. Every
// node writes its own every heartbeatInterval; GET /api/v1/nodes lists
// them.
type NodeInfo struct {
	Name string `json:"name"`
	// Instance tells two runs of the same node name apart: a fresh random
	// id per start.
	Instance    string    `json:"instance"`
	Version     string    `json:"version,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// Draining: the node is stopping; it takes no new work and finishes
	// what it runs.
	Draining        bool `json:"draining"`
	Capacity        int  `json:"capacity"`
	Running         int  `json:"running"`
	Queued          int  `json:"queued"`
	QueueSize       int  `json:"queue_size"`
	Sessions        int  `json:"sessions"`
	SessionCapacity int  `json:"session_capacity"`
	// WarmJails are the jails ready to take (the warm pool); omitted when
	// the node has no pool.
	WarmJails *int    `json:"warm_jails,omitempty"`
	CPUs      int     `json:"cpus"`
	Load1     float64 `json:"load1"` // the host's 1-minute load average
	// LostBy is set in the entry of a node declared lost: the node that
	// declared it, and is settling its executions (nodelost.go).
	LostBy string `json:"lost_by,omitempty"`
}

// ErrNodeNameInUse is returned by Start when a live node already has
// Config.Node as its name.
var ErrNodeNameInUse = errors.New("node name in use")

// membership is this node's part in the fleet: its own heartbeat entry and
// what it last saw of every other node's (nodelost.go watches them).
type membership struct {
	instance  string
	startedAt time.Time
	draining  atomic.Bool

	// stop ends the heartbeat loop, which outlives e.stopping: a node
	// keeps saying it is alive (and draining) while Close waits for its
	// executions. beating is closed when the loop has returned.
	stop    context.CancelFunc
	beating chan struct{}
	// unping ends the subscription of answerPings.
	unping func() error

	mu    sync.Mutex
	rev   uint64 // revision of this node's entry as last written
	peers map[string]*peer
}

// peer is what this node last saw of another node's heartbeat entry: a
// heartbeat, or the mark of a node declared lost (info.LostBy).
type peer struct {
	info NodeInfo
	rev  uint64
	// seen is when this node saw that revision, on its own monotonic
	// clock: silence is measured here, never by comparing clocks.
	seen time.Time
	// tried is the revision this node last tried to declare lost.
	tried uint64
}

func newMembership() *membership {
	return &membership{instance: uuid.NewString(), peers: make(map[string]*peer)}
}

// heartbeat is this node's entry as of now.
func (e *Engine) heartbeat() NodeInfo {
	st := e.Stats()
	info := NodeInfo{
		Name: e.cfg.Node, Instance: e.mem.instance, Version: e.cfg.Version,
		StartedAt: e.mem.startedAt, HeartbeatAt: run.Now(), Draining: e.mem.draining.Load(),
		Capacity: st.Capacity, Running: st.Running, Queued: st.Queued, QueueSize: st.QueueSize,
		Sessions: e.liveSessions(), SessionCapacity: e.cfg.Sessions.Max,
		CPUs: runtime.NumCPU(), Load1: loadAverage(),
	}
	if e.deps.WarmJails != nil {
		n := e.deps.WarmJails()
		info.WarmJails = &n
	}
	return info
}

// liveSessions counts this node's sessions.
func (e *Engine) liveSessions() int {
	e.sess.mu.Lock()
	defer e.sess.mu.Unlock()
	return len(e.sess.live)
}

// loadAverage is the host's 1-minute load average; 0 where /proc does not
// tell it.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return v
}

// join writes this node's first heartbeat entry. A node of the same name
// that is still alive keeps it, and Start fails with ErrNodeNameInUse; the
// entry of one that died (a crash, then this restart) is taken over.
func (e *Engine) join(ctx context.Context) error {
	e.mem.startedAt = run.Now()
	b, err := json.Marshal(e.heartbeat())
	if err != nil {
		return fmt.Errorf("encoding heartbeat: %w", err)
	}
	name := e.cfg.Node
	for {
		old, err := e.st.GetMember(ctx, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		default:
			if err := e.takeOver(ctx, old); err != nil {
				return err
			}
		}
		rev, err := e.st.CreateMember(ctx, name, b)
		if errors.Is(err, store.ErrExists) {
			continue // written meanwhile: look at it again
		}
		if err != nil {
			return err
		}
		e.mem.mu.Lock()
		e.mem.rev = rev
		e.mem.mu.Unlock()
		return nil
	}
}

// takeOver removes the entry a previous node of this name left, once it
// is clear that node is dead: every node answers pings on a control
// subject of its instance (see answerPings), and a dead one has no
// subscription there, which the server reports at once. A live node of
// this name, or one that does not say, makes join fail with
// ErrNodeNameInUse.
func (e *Engine) takeOver(ctx context.Context, old store.Entry) error {
	var info NodeInfo
	if err := json.Unmarshal(old.Value, &info); err != nil {
		return fmt.Errorf("decoding the heartbeat of %s: %w", old.Key, err)
	}
	pctx, cancel := context.WithTimeout(ctx, pingWait)
	defer cancel()
	_, err := e.st.SendControl(pctx, nodeControlID(info.Instance), []byte(`{"op":"ping"}`))
	if !errors.Is(err, store.ErrNoOwner) {
		why := "it answers"
		if err != nil {
			why = "it did not say whether it is alive: " + err.Error()
		}
		return fmt.Errorf("%w: node %q (instance %s, started %s, last heartbeat %s): %s; give this node another --node-name",
			ErrNodeNameInUse, e.cfg.Node, info.Instance, info.StartedAt.Format(time.RFC3339),
			info.HeartbeatAt.Format(time.RFC3339), why)
	}
	err = e.st.RemoveMember(ctx, old.Key, old.Revision)
	if errors.Is(err, store.ErrConflict) {
		return nil // rewritten or removed meanwhile: join looks again
	}
	if err == nil {
		e.log.Info("took over the heartbeat entry of a previous run of this node", "node", old.Key,
			"instance", info.Instance, "last_heartbeat", info.HeartbeatAt)
	}
	return err
}

// nodeControlID names the control subject of a node instance.
func nodeControlID(instance string) string { return "node-" + instance }

// answerPings makes this instance answer on its control subject, so that
// a node started with the same name can tell it is alive (takeOver).
func (e *Engine) answerPings() error {
	stop, err := e.st.HandleControl(nodeControlID(e.mem.instance), func([]byte) []byte {
		return []byte(`{"status":"alive"}`)
	})
	if err != nil {
		return err
	}
	e.mem.unping = stop
	return nil
}

// beat writes this node's heartbeat every heartbeatInterval until ctx
// ends. A write that fails is logged and tried again at the next beat;
// survivors only act after Config.NodeLostAfter of silence.
func (e *Engine) beat(ctx context.Context) {
	defer close(e.mem.beating)
	t := time.NewTicker(heartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.writeHeartbeat(ctx)
	}
}

// writeHeartbeat writes the heartbeat once.
func (e *Engine) writeHeartbeat(ctx context.Context) {
	b, err := json.Marshal(e.heartbeat())
	if err != nil {
		e.log.Error("encoding heartbeat", "err", err)
		return
	}
	wctx, cancel := context.WithTimeout(ctx, heartbeatInterval)
	defer cancel()
	rev, err := e.st.PutMember(wctx, e.cfg.Node, b)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("writing heartbeat", "err", err)
		}
		return
	}
	e.mem.mu.Lock()
	e.mem.rev = rev
	e.mem.mu.Unlock()
}

// startBeating starts the heartbeat loop; leave stops it.
func (e *Engine) startBeating() {
	ctx, cancel := context.WithCancel(context.Background())
	e.mem.stop = cancel
	e.mem.beating = make(chan struct{})
	go e.beat(ctx)
}

// drain marks this node draining in its heartbeat at once, so that the
// others stop sending it work while Close waits.
func (e *Engine) drain() {
	e.mem.draining.Store(true)
	e.writeHeartbeat(context.Background())
}

// leave stops the heartbeat and removes this node's entry, so that the
// others drop it at once instead of declaring it lost. The entry is only
// removed if it is still the one this node wrote.
func (e *Engine) leave() {
	e.mem.stop()
	<-e.mem.beating
	if err := e.mem.unping(); err != nil {
		// The subscription ends with the connection anyway.
		e.log.Debug("unsubscribing from this node's control subject", "err", err)
	}
	e.mem.mu.Lock()
	rev := e.mem.rev
	e.mem.mu.Unlock()
	// Bounded like a heartbeat: an unreachable store must not hold up the
	// stop; the entry then expires, or the others declare this node lost.
	ctx, cancel := context.WithTimeout(context.Background(), heartbeatInterval)
	defer cancel()
	if err := e.st.RemoveMember(ctx, e.cfg.Node, rev); err != nil && !errors.Is(err, store.ErrClosed) {
		e.log.Warn("removing this node's heartbeat", "err", err)
	}
}

// Nodes lists the nodes this node knows to be alive, itself included, by
// name: those whose heartbeat it saw within Config.NodeLostAfter.
func (e *Engine) Nodes() []NodeInfo {
	self := e.heartbeat()
	list := []NodeInfo{self}
	e.mem.mu.Lock()
	for name, p := range e.mem.peers {
		if name != self.Name && p.info.LostBy == "" && time.Since(p.seen) < e.cfg.NodeLostAfter {
			list = append(list, p.info)
		}
	}
	e.mem.mu.Unlock()
	slices.SortFunc(list, func(a, b NodeInfo) int { return strings.Compare(a.Name, b.Name) })
	return list
}
