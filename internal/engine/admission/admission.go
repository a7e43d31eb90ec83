// Package admission decides when an execution may run on this node: it
// holds the node's slots and shares them fairly among callers (API keys),
// on this node and across the fleet, and it enforces the node's queue
// bound and the per-key quotas.
//
// It owns counting, lines and turns, nothing else: it never stores,
// runs or reads an execution, knows nothing of records, callers' rights
// or the store, and learns the fleet's counts only through Counts. The
// executions package asks it for slots (Gate.EnterSync, Gate.Claim...).
package admission

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/pyexec/pyexec/internal/engine/run"
)

// ErrOverloaded: the node's queue is full (429 + Retry-After).
var ErrOverloaded = errors.New("server is at capacity")

// ErrKeyOverloaded is ErrOverloaded for one caller: it has as many
// executions waiting as one API key may (429 + Retry-After); wrapped with
// the key, the count and the flag.
var ErrKeyOverloaded = fmt.Errorf("%w for this API key", ErrOverloaded)

// ErrClosed is the engine's: the gate was closed (503).
var ErrClosed = run.ErrClosed

// Config bounds a node's executions. Zero fields take the defaults
// documented on each.
type Config struct {
	// Concurrency bounds the executions running at once on this node.
	// Default: runtime.NumCPU().
	Concurrency int
	// QueueSize bounds the executions admitted but not yet running (sync
	// callers waiting for a slot plus queued async jobs). Default: 4 ×
	// Concurrency. Beyond Concurrency+QueueSize, requests get ErrOverloaded.
	QueueSize int
	// MaxRunningPerKey bounds the executions of one caller (API key)
	// running at once across the fleet, MaxQueuedPerKey those waiting for
	// a slot; beyond the latter, ErrOverloaded. Zero: no bound beyond
	// Concurrency and QueueSize. Slots go to callers in turn either way.
	MaxRunningPerKey, MaxQueuedPerKey int
}

// WithDefaults fills the zero fields of c with their defaults.
func (c Config) WithDefaults() Config {
	if c.Concurrency == 0 {
		c.Concurrency = runtime.NumCPU()
	}
	if c.QueueSize == 0 {
		c.QueueSize = 4 * c.Concurrency
	}
	return c
}

// Stats is a snapshot of this node's load.
type Stats struct {
	Running   int // executions running now
	Queued    int // admitted, not yet running (sync waiters + async jobs)
	Capacity  int // Config.Concurrency
	QueueSize int // Config.QueueSize
}

// New applies the defaults to cfg, checks it and returns the node's gate.
func New(cfg Config, counts Counts) (*Gate, error) {
	cfg = cfg.WithDefaults()
	switch {
	case cfg.Concurrency < 1:
		return nil, errors.New("concurrency must be at least 1")
	case cfg.QueueSize < 0:
		return nil, errors.New("queue size must not be negative")
	case cfg.MaxRunningPerKey < 0 || cfg.MaxQueuedPerKey < 0:
		return nil, errors.New("per-key limits must not be negative")
	}
	return newGate(cfg.Concurrency, cfg.QueueSize, cfg.MaxRunningPerKey, cfg.MaxQueuedPerKey, counts), nil
}

// Gate bounds what this node runs and shares its slots fairly among
// callers (API keys), on this node and across the fleet.
//
// Running executions take one of capacity slots (a local bound). A sync
// caller that finds no free slot waits in its caller's line on this node
// (in a fleet it goes through the queue instead, see executions'
// runQueued); a free slot goes to the line of the caller running the
// fewest executions, round-robin among equals. Async jobs wait in the
// fleet's queue, one queue per caller; the dispatcher claims a slot
// only when one is free and no sync caller waits here (they hold a
// connection open), then takes a job from the caller running the fewest
// executions fleet-wide, round-robin among equals. Nothing is fetched
// early, so a job waits in the queue until some node has a free slot.
//
// Limits: when this node's running + waiting executions plus the fleet's
// queued async jobs reach capacity+queueSize, new requests are refused
// with ErrOverloaded. Per caller, at most perKeyRunning run at once
// fleet-wide (the rest wait even if slots are free) and at most
// perKeyQueued wait fleet-wide; beyond, ErrOverloaded naming the
// caller's limit. Zero means no per-caller limit beyond the node's.
//
// Fleet-wide counts come from view (Counts), this node's copy of the index. It
// lags other nodes' writes by the index watch (milliseconds), so two
// nodes admitting at the same moment may overshoot a per-caller limit by
// about one execution each.
type Gate struct {
	capacity, queueSize         int
	perKeyRunning, perKeyQueued int
	view                        Counts

	mu      sync.Mutex
	running int // slots in use on this node
	waiting int // sync tickets in lines
	// submitting holds the async submissions admitted here and not yet
	// recorded, by execution id (their keys): counted until the index
	// holds their records (submittingLocked).
	submitting map[string]string
	// claimed counts the slots in running claimed for a job not taken
	// yet: admissions do not count them (a job taken for one is counted
	// in the queue already). taking counts the slots of async jobs taken
	// whose records may still say pending: they are in running and,
	// through the index, in the queue, and are counted once.
	claimed, taking int
	keys            map[string]*keyLine // callers with work here
	order           []string            // callers with a non-empty line, in turn order
	lastAsync       string              // the caller whose job the dispatcher took last
	closed          bool
	changed         chan struct{} // closed and replaced when the dispatcher may act
}

// Counts counts the executions of the whole fleet; the engine reads them
// from the store's index.
type Counts interface {
	// Running and Pending count key's executions with that status.
	Running(key string) int
	Pending(key string) int
	// QueuedAsync returns the callers with async jobs waiting, and how
	// many jobs wait in all.
	QueuedAsync() (keys []string, total int)
	// Indexed reports whether the index holds execution id's record:
	// from then on the counts above include it while it waits (read them
	// first: a record that shows up between the two reads is then missed
	// for a moment, never counted twice).
	Indexed(id string) bool
}

// keyLine is one caller's share of this node.
type keyLine struct {
	running    int // slots of this node
	submitting int
	line       []*Ticket // sync callers waiting here
}

// Ticket is one execution's slot, or its place in its caller's line.
type Ticket struct {
	adm     *Gate
	key     string
	granted chan struct{} // closed when the slot is the Ticket's
	taking  bool          // an async job's slot, counted in Gate.taking
}

func newGate(capacity, queueSize, perKeyRunning, perKeyQueued int, view Counts) *Gate {
	return &Gate{capacity: capacity, queueSize: queueSize, perKeyRunning: perKeyRunning,
		perKeyQueued: perKeyQueued, view: view, keys: make(map[string]*keyLine), submitting: make(map[string]string),
		changed: make(chan struct{})}
}

func (a *Gate) lineLocked(key string) *keyLine {
	k := a.keys[key]
	if k == nil {
		k = &keyLine{}
		a.keys[key] = k
	}
	return k
}

// forgetLocked drops a caller's entry once nothing of it is left.
func (a *Gate) forgetLocked(key string) {
	if k := a.keys[key]; k != nil && k.running == 0 && k.submitting == 0 && len(k.line) == 0 {
		delete(a.keys, key)
	}
}

// wakeLocked tells the dispatcher that something changed.
func (a *Gate) wakeLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// runningLocked is how many executions of key run: the fleet's count, or
// this node's if higher (a slot is taken before its record says running).
func (a *Gate) runningLocked(key string) int {
	n := a.view.Running(key)
	if k := a.keys[key]; k != nil {
		n = max(n, k.running)
	}
	return n
}

// queuedLocked is how many executions of key wait fleet-wide, counting
// this node's admissions not yet recorded.
func (a *Gate) queuedLocked(key string) int {
	n := a.view.Pending(key)
	if k := a.keys[key]; k != nil {
		n = max(n, len(k.line)) + a.submittingLocked(key)
	}
	return n
}

// waitingLocked counts the executions waiting: this node's sync callers,
// the fleet's queued async jobs and this node's submissions not recorded
// yet, the index read before the submissions (see Counts.Indexed).
func (a *Gate) waitingLocked() int {
	queued := a.queuedAsyncLocked()
	return a.waiting + queued + a.submittingLocked("")
}

// submittingLocked counts key's async submissions admitted here whose
// records the index does not hold yet (key "": every key's). From the
// moment it does, the index counts them: a job is never counted twice,
// even when the index's watch shows its record before its writer hears
// that it is stored.
func (a *Gate) submittingLocked(key string) int {
	n := 0
	for id, k := range a.submitting {
		if (key == "" || k == key) && !a.view.Indexed(id) {
			n++
		}
	}
	return n
}

func (a *Gate) underRunCap(key string) bool {
	return a.perKeyRunning == 0 || a.runningLocked(key) < a.perKeyRunning
}

// admitLocked checks the node's and key's limits for one more waiting
// execution of key.
func (a *Gate) admitLocked(key string) error {
	if a.closed {
		return ErrClosed
	}
	if a.running-a.claimed+a.waitingLocked() >= a.capacity+a.queueSize {
		return ErrOverloaded
	}
	if n := a.queuedLocked(key); a.perKeyQueued > 0 && n >= a.perKeyQueued {
		return fmt.Errorf("%w: %q has %d executions waiting, the most one key may have (--max-queued-per-key)",
			ErrKeyOverloaded, key, n)
	}
	return nil
}

// EnterSync admits a sync execution of key. The slot may be granted at
// once or later; wait for it with Ticket.wait.
func (a *Gate) EnterSync(key string) (*Ticket, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	if t := a.grantLocked(key); t != nil {
		return t, nil
	}
	t := &Ticket{adm: a, key: key, granted: make(chan struct{})}
	if err := a.admitLocked(key); err != nil {
		return nil, err
	}
	k := a.lineLocked(key)
	k.line = append(k.line, t)
	a.waiting++
	if len(k.line) == 1 {
		a.order = append(a.order, key)
	}
	a.scheduleLocked()
	return t, nil
}

// TrySync grants key a slot for a sync execution if one is free for it
// now, and returns nil (taking nothing) otherwise.
func (a *Gate) TrySync(key string) (*Ticket, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	return a.grantLocked(key), nil
}

// grantLocked gives key a slot if one is free for it and no sync caller
// waits, else returns nil.
func (a *Gate) grantLocked(key string) *Ticket {
	if a.running >= a.capacity || a.waiting > 0 || !a.underRunCap(key) {
		return nil
	}
	t := &Ticket{adm: a, key: key, granted: make(chan struct{})}
	a.lineLocked(key).running++
	a.running++
	close(t.granted)
	return t
}

// scheduleLocked grants free slots to the sync lines in turn: each slot
// goes to the line whose caller runs the fewest executions, the earliest
// in the turn order among equals; the served line goes to the back. A
// line whose caller is at its running limit is skipped and keeps its
// turn.
func (a *Gate) scheduleLocked() {
	for a.running < a.capacity {
		pick, fewest := -1, 0
		for i, key := range a.order {
			if !a.underRunCap(key) {
				continue
			}
			if n := a.runningLocked(key); pick < 0 || n < fewest {
				pick, fewest = i, n
			}
		}
		if pick < 0 {
			return
		}
		key := a.order[pick]
		k := a.keys[key]
		t := k.line[0]
		k.line = k.line[1:]
		k.running++
		a.running++
		a.waiting--
		close(t.granted)
		a.order = append(a.order[:pick], a.order[pick+1:]...)
		if len(k.line) > 0 {
			a.order = append(a.order, key)
		}
	}
}

// Poke grants what the fleet's counts allow now (another node's
// execution of a capped caller ended).
func (a *Gate) Poke() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.scheduleLocked()
}

// Wait blocks until the slot is granted or ctx ends. On success the caller
// owns a slot and must call release.
func (t *Ticket) Wait(ctx context.Context) error {
	select {
	case <-t.granted:
		return nil
	case <-ctx.Done():
	}
	// Granted or not, the caller will not run: hand back what it holds.
	t.Abandon()
	return context.Cause(ctx)
}

// Abandon gives the Ticket back without running: the slot if it was
// granted, else the place in line.
func (t *Ticket) Abandon() {
	a := t.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	k := a.keys[t.key]
	for i, w := range k.line {
		if w == t {
			k.line = append(k.line[:i], k.line[i+1:]...)
			a.waiting--
			if len(k.line) == 0 {
				a.dropTurnLocked(t.key)
			}
			a.forgetLocked(t.key)
			a.wakeLocked()
			return
		}
	}
	a.releaseLocked(t.key)
}

func (a *Gate) dropTurnLocked(key string) {
	for i, o := range a.order {
		if o == key {
			a.order = append(a.order[:i], a.order[i+1:]...)
			return
		}
	}
}

// Release frees the Ticket's slot for the next line in turn.
func (t *Ticket) Release() {
	a := t.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	t.recordedLocked()
	a.releaseLocked(t.key)
}

// Recorded ends the double count of an async job's slot (taking) once
// its record says running, or when it ends without.
func (t *Ticket) Recorded() {
	a := t.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	t.recordedLocked()
}

func (t *Ticket) recordedLocked() {
	if t.taking {
		t.taking = false
		t.adm.taking--
	}
}

// queuedAsyncLocked is how many async jobs wait fleet-wide, less the ones
// this node has taken whose records still say pending (already counted in
// running).
func (a *Gate) queuedAsyncLocked() int {
	_, async := a.view.QueuedAsync()
	return max(0, async-a.taking)
}

func (a *Gate) releaseLocked(key string) {
	a.keys[key].running--
	a.running--
	a.forgetLocked(key)
	a.scheduleLocked()
	a.wakeLocked()
}

// ReserveAsync counts job id of key, about to be recorded and queued,
// until the index holds its record or Submitted.
func (a *Gate) ReserveAsync(key, id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.admitLocked(key); err != nil {
		return err
	}
	a.submitting[id] = key
	a.lineLocked(key).submitting++
	return nil
}

// Submitted ends the count of ReserveAsync: job id's record is in the
// index, which counts it from now on, or it was refused.
func (a *Gate) Submitted(key, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.submitting[id]; !ok {
		return
	}
	delete(a.submitting, id)
	a.lineLocked(key).submitting--
	a.forgetLocked(key)
}

// Queued wakes the dispatcher for a job just queued here.
func (a *Gate) Queued() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.wakeLocked()
}

// Claim takes a free slot for an async job when no sync caller waits
// here and some caller has jobs queued, and returns the callers to try in
// order (see asyncOrderLocked). It returns none, and takes no slot, when
// there is nothing to do; changed is closed once that may be different.
func (a *Gate) Claim() (keys []string, changed <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.running >= a.capacity || a.waiting > 0 {
		return nil, a.changed
	}
	if _, total := a.view.QueuedAsync(); total <= a.taking {
		return nil, a.changed // the queued jobs listed are the ones taken here
	}
	keys = a.asyncOrderLocked()
	if len(keys) > 0 {
		a.running++
		a.claimed++
	}
	return keys, a.changed
}

// Unclaim gives back a claimed slot no job was taken for.
func (a *Gate) Unclaim() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.running--
	a.claimed--
	a.scheduleLocked()
}

// asyncOrderLocked lists the callers whose queued jobs may take a free
// slot, in the order to try them: fewest running fleet-wide first, then
// round-robin after the caller served last. Callers at their running
// limit are left out.
func (a *Gate) asyncOrderLocked() []string {
	keys, _ := a.view.QueuedAsync()
	keys = slices.DeleteFunc(keys, func(k string) bool { return !a.underRunCap(k) })
	// keys are in name order: rotate to start after the last served.
	i, found := slices.BinarySearch(keys, a.lastAsync)
	if found {
		i++
	}
	keys = append(keys[i:], keys[:i]...)
	running := make(map[string]int, len(keys))
	for _, k := range keys {
		running[k] = a.runningLocked(k)
	}
	slices.SortStableFunc(keys, func(x, y string) int { return running[x] - running[y] })
	return keys
}

// StartAsync makes a claimed slot key's, whose job was taken.
func (a *Gate) StartAsync(key string) *Ticket {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lineLocked(key).running++
	a.claimed--
	a.taking++
	a.lastAsync = key
	t := &Ticket{adm: a, key: key, granted: make(chan struct{}), taking: true}
	close(t.granted)
	return t
}

// Close refuses new admissions and claims. Callers already waiting are
// stopped by the engine through their context.
func (a *Gate) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	a.wakeLocked()
}

// Stats reports this node's load.
func (a *Gate) Stats() Stats {
	running, queued := a.stats()
	return Stats{Running: running, Queued: queued, Capacity: a.capacity, QueueSize: a.queueSize}
}

// stats returns this node's running executions and the executions
// waiting: its sync callers and the fleet's queued async jobs.
func (a *Gate) stats() (running, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running - a.claimed, a.waitingLocked()
}

// Admitted reports whether t holds its slot already, without waiting.
func (t *Ticket) Admitted() bool {
	select {
	case <-t.granted:
		return true
	default:
		return false
	}
}
