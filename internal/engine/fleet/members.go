package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// HeartbeatInterval is how often a node writes its heartbeat entry.
const HeartbeatInterval = 2 * time.Second

// DefaultNodeLostAfter is the default of Config.NodeLostAfter.
const DefaultNodeLostAfter = 10 * time.Second

// pingWait bounds how long a node waits for another to answer a ping.
const pingWait = 2 * time.Second

// claimTimeout bounds each store write of declaring a node lost.
const claimTimeout = 30 * time.Second

// NodeInfo is one node's heartbeat: who it is and how busy it is. Every
// node writes its own every HeartbeatInterval; GET /api/v1/nodes lists
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
	// URL is the node's API as the other nodes reach it (--advertise-url):
	// where they relay previews of its sessions. Empty: not advertised.
	URL string `json:"url,omitempty"`
	// LostBy is set in the entry of a node declared lost: the node that
	// declared it, and is settling its executions (nodelost.go).
	LostBy string `json:"lost_by,omitempty"`
}

// ErrNodeNameInUse is returned by Join when a live node already has
// Config.Node as its name.
var ErrNodeNameInUse = errors.New("node name in use")

// Config is this node's identity in the fleet.
type Config struct {
	// Node names this server in a fleet, unique among the nodes that
	// share a store; its heartbeat is stored under it. Required.
	Node string
	// Version is the build's version, told in the node's heartbeat.
	Version string
	// NodeLostAfter is how long a node may write no heartbeat before the
	// others declare it lost. Default DefaultNodeLostAfter; at least
	// twice HeartbeatInterval.
	NodeLostAfter time.Duration
	// URL is this node's API as the others reach it (NodeInfo.URL).
	URL string
}

// Store is the part of the shared store membership uses: the nodes
// bucket and the control subjects; *store.NATS implements it.
type Store interface {
	store.Members
	store.Control
}

// Load is what a heartbeat tells of this node's work.
type Load struct {
	Capacity, Running, Queued, QueueSize int
	Sessions, SessionCapacity            int
	// WarmJails are the jails ready to take; nil without a pool.
	WarmJails *int
}

// Deps are what membership asks of the rest of the engine. Store, Load
// and Settle are required.
type Deps struct {
	Store Store
	// Load is this node's work as of now; it is called every heartbeat
	// and must be cheap.
	Load func() Load
	// Settle ends the unfinished executions of a node declared lost,
	// silent for silentFor (the executions' business), and returns how
	// many it ended.
	Settle func(node string, silentFor time.Duration) (int, error)
	// OnLost, if set, is told the name of a node that this node declared
	// lost, after Settle succeeded. Of the surviving nodes exactly one is
	// told about each loss.
	OnLost func(node string)
	// OnSelfLost, if set, is called (on a goroutine of its own) when
	// this node sees that another node declared it lost: the mark on its
	// heartbeat entry, or the entry's removal, while it is not draining.
	OnSelfLost func()
	Logger     *slog.Logger // nil discards
}

// Membership is this node's part in the fleet: its own heartbeat entry and
// what it last saw of every other node's (nodelost.go watches them).
// Build it with New; Join, Run, then Stop, Drain and Leave.
type Membership struct {
	cfg  Config
	deps Deps
	st   Store
	log  *slog.Logger

	instance  string
	startedAt time.Time
	draining  atomic.Bool

	// stopping ends the watch of the other nodes and the search for
	// silent ones (Stop); wg counts those goroutines (Wait).
	stopping context.Context
	stopAll  context.CancelFunc
	wg       sync.WaitGroup
	// watch is the watch of the nodes' heartbeats Join started, which
	// unwatch ends; Run follows it.
	watch   <-chan store.MemberEvent
	unwatch context.CancelFunc
	// stop ends the heartbeat loop, which outlives stopping: a node
	// keeps saying it is alive (and draining) while the engine waits for
	// its executions. beating is closed when the loop has returned.
	stop    context.CancelFunc
	beating chan struct{}
	// unping ends the subscription of answerPings.
	unping func() error

	mu    sync.Mutex
	rev   uint64 // revision of this node's entry as last written
	peers map[string]*peer
}

// New checks cfg and returns this node's membership, which does nothing
// until Join.
func New(cfg Config, deps Deps) (*Membership, error) {
	if cfg.NodeLostAfter == 0 {
		cfg.NodeLostAfter = DefaultNodeLostAfter
	}
	switch {
	case cfg.Node == "":
		return nil, errors.New("a node name is required")
	case cfg.NodeLostAfter < 2*HeartbeatInterval:
		return nil, errors.New("node-lost-after must be at least 4s (two heartbeats)")
	case deps.Store == nil || deps.Load == nil || deps.Settle == nil:
		return nil, errors.New("membership needs a store, the node's load and the settling of lost nodes")
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stopping, stopAll := context.WithCancel(context.Background())
	return &Membership{cfg: cfg, deps: deps, st: deps.Store, log: log, instance: uuid.NewString(),
		stopping: stopping, stopAll: stopAll, peers: make(map[string]*peer)}, nil
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

// heartbeat is this node's entry as of now.
func (m *Membership) heartbeat() NodeInfo {
	l := m.deps.Load()
	return NodeInfo{
		Name: m.cfg.Node, Instance: m.instance, Version: m.cfg.Version, URL: m.cfg.URL,
		StartedAt: m.startedAt, HeartbeatAt: run.Now(), Draining: m.draining.Load(),
		Capacity: l.Capacity, Running: l.Running, Queued: l.Queued, QueueSize: l.QueueSize,
		Sessions: l.Sessions, SessionCapacity: l.SessionCapacity, WarmJails: l.WarmJails,
		CPUs: runtime.NumCPU(), Load1: loadAverage(),
	}
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

// Join makes this node a member of the fleet: it answers pings on its
// instance's control subject, writes its first heartbeat (ErrNodeNameInUse
// when a live node has its name), keeps beating until Leave, and learns
// every other node's entry before it returns, so that NodeAlive answers.
// On error it leaves nothing behind.
func (m *Membership) Join(ctx context.Context) error {
	if err := m.answerPings(); err != nil {
		return fmt.Errorf("engine: answering on this node's control subject: %w", err)
	}
	if err := m.join(ctx); err != nil {
		_ = m.unping()
		return fmt.Errorf("engine: joining the fleet as node %q: %w", m.cfg.Node, err)
	}
	m.startBeating()
	watch, unwatch, err := m.watchMembers(ctx)
	if err != nil {
		m.Leave()
		return fmt.Errorf("engine: watching the nodes' heartbeats: %w", err)
	}
	m.watch, m.unwatch = watch, unwatch
	return nil
}

// Run follows the other nodes' heartbeats and declares lost those that
// fall silent, until Stop.
func (m *Membership) Run() {
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		defer m.unwatch()
		m.followMembers(m.watch)
	}()
	go func() {
		defer m.wg.Done()
		m.watchSilence(m.stopping)
	}()
}

// Stop ends what Run started; the heartbeat goes on until Leave.
func (m *Membership) Stop() { m.stopAll() }

// Wait waits for what Run started to end after Stop.
func (m *Membership) Wait() { m.wg.Wait() }

// join writes this node's first heartbeat entry. A node of the same name
// that is still alive keeps it, and Join fails with ErrNodeNameInUse; the
// entry of one that died (a crash, then this restart) is taken over.
func (m *Membership) join(ctx context.Context) error {
	m.startedAt = run.Now()
	b, err := json.Marshal(m.heartbeat())
	if err != nil {
		return fmt.Errorf("encoding heartbeat: %w", err)
	}
	name := m.cfg.Node
	for {
		old, err := m.st.GetMember(ctx, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		default:
			if err := m.takeOver(ctx, old); err != nil {
				return err
			}
		}
		rev, err := m.st.CreateMember(ctx, name, b)
		if errors.Is(err, store.ErrExists) {
			continue // written meanwhile: look at it again
		}
		if err != nil {
			return err
		}
		m.mu.Lock()
		m.rev = rev
		m.mu.Unlock()
		return nil
	}
}

// takeOver removes the entry a previous node of this name left, once it
// is clear that node is dead: every node answers pings on a control
// subject of its instance (see answerPings), and a dead one has no
// subscription there, which the server reports at once. A live node of
// this name, or one that does not say, makes join fail with
// ErrNodeNameInUse.
func (m *Membership) takeOver(ctx context.Context, old store.Entry) error {
	var info NodeInfo
	if err := json.Unmarshal(old.Value, &info); err != nil {
		return fmt.Errorf("decoding the heartbeat of %s: %w", old.Key, err)
	}
	pctx, cancel := context.WithTimeout(ctx, pingWait)
	defer cancel()
	_, err := m.st.SendControl(pctx, nodeControlID(info.Instance), []byte(`{"op":"ping"}`))
	if !errors.Is(err, store.ErrNoOwner) {
		why := "it answers"
		if err != nil {
			why = "it did not say whether it is alive: " + err.Error()
		}
		return fmt.Errorf("%w: node %q (instance %s, started %s, last heartbeat %s): %s; give this node another --node-name",
			ErrNodeNameInUse, m.cfg.Node, info.Instance, info.StartedAt.Format(time.RFC3339),
			info.HeartbeatAt.Format(time.RFC3339), why)
	}
	err = m.st.RemoveMember(ctx, old.Key, old.Revision)
	if errors.Is(err, store.ErrConflict) {
		return nil // rewritten or removed meanwhile: join looks again
	}
	if err == nil {
		m.log.Info("took over the heartbeat entry of a previous run of this node", "node", old.Key,
			"instance", info.Instance, "last_heartbeat", info.HeartbeatAt)
	}
	return err
}

// nodeControlID names the control subject of a node instance.
func nodeControlID(instance string) string { return "node-" + instance }

// answerPings makes this instance answer on its control subject, so that
// a node started with the same name can tell it is alive (takeOver).
func (m *Membership) answerPings() error {
	stop, err := m.st.HandleControl(nodeControlID(m.instance), func([]byte) []byte {
		return []byte(`{"status":"alive"}`)
	})
	if err != nil {
		return err
	}
	m.unping = stop
	return nil
}

// beat writes this node's heartbeat every HeartbeatInterval until ctx
// ends. A write that fails is logged and tried again at the next beat;
// survivors only act after Config.NodeLostAfter of silence.
func (m *Membership) beat(ctx context.Context) {
	defer close(m.beating)
	t := time.NewTicker(HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.writeHeartbeat(ctx)
	}
}

// writeHeartbeat writes the heartbeat once.
func (m *Membership) writeHeartbeat(ctx context.Context) {
	b, err := json.Marshal(m.heartbeat())
	if err != nil {
		m.log.Error("encoding heartbeat", "err", err)
		return
	}
	wctx, cancel := context.WithTimeout(ctx, HeartbeatInterval)
	defer cancel()
	rev, err := m.st.PutMember(wctx, m.cfg.Node, b)
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("writing heartbeat", "err", err)
		}
		return
	}
	m.mu.Lock()
	m.rev = rev
	m.mu.Unlock()
}

// startBeating starts the heartbeat loop; Leave stops it.
func (m *Membership) startBeating() {
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	m.beating = make(chan struct{})
	go m.beat(ctx)
}

// Drain marks this node draining in its heartbeat at once, so that the
// others stop sending it work while the engine closes.
func (m *Membership) Drain() {
	m.draining.Store(true)
	m.writeHeartbeat(context.Background())
}

// Leave stops the heartbeat and removes this node's entry, so that the
// others drop it at once instead of declaring it lost. The entry is only
// removed if it is still the one this node wrote.
func (m *Membership) Leave() {
	m.stop()
	<-m.beating
	if err := m.unping(); err != nil {
		// The subscription ends with the connection anyway.
		m.log.Debug("unsubscribing from this node's control subject", "err", err)
	}
	m.mu.Lock()
	rev := m.rev
	m.mu.Unlock()
	// Bounded like a heartbeat: an unreachable store must not hold up the
	// stop; the entry then expires, or the others declare this node lost.
	ctx, cancel := context.WithTimeout(context.Background(), HeartbeatInterval)
	defer cancel()
	if err := m.st.RemoveMember(ctx, m.cfg.Node, rev); err != nil && !errors.Is(err, store.ErrClosed) {
		m.log.Warn("removing this node's heartbeat", "err", err)
	}
}

// Nodes lists the nodes this node knows to be alive, itself included, by
// name: those whose heartbeat it saw within Config.NodeLostAfter.
func (m *Membership) Nodes() []NodeInfo {
	self := m.heartbeat()
	list := []NodeInfo{self}
	m.mu.Lock()
	for name, p := range m.peers {
		if name != self.Name && p.info.LostBy == "" && time.Since(p.seen) < m.cfg.NodeLostAfter {
			list = append(list, p.info)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(list, func(a, b NodeInfo) int { return strings.Compare(a.Name, b.Name) })
	return list
}

// NodeURL is the URL node advertises (NodeInfo.URL), for a node this node
// knows to be alive (as Nodes lists them); an error says why there is
// none.
func (m *Membership) NodeURL(node string) (string, error) {
	u, alive := m.cfg.URL, node == m.cfg.Node
	if !alive {
		m.mu.Lock()
		if p, ok := m.peers[node]; ok && p.info.LostBy == "" && time.Since(p.seen) < m.cfg.NodeLostAfter {
			u, alive = p.info.URL, true
		}
		m.mu.Unlock()
	}
	switch {
	case !alive:
		return "", fmt.Errorf("node %s is not alive in the fleet", node)
	case u == "":
		return "", fmt.Errorf("node %s advertises no URL (start it with --advertise-url)", node)
	}
	return u, nil
}
