package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// admission bounds what this node runs and shares its slots fairly among
// callers (API keys), on this node and across the fleet.
//
// Running executions take one of capacity slots (a local bound). A sync
// caller that finds no free slot waits in its caller's line on this node
// (in a fleet it goes through the queue instead, see runQueued);
// a free slot goes to the line of the caller running the fewest
// executions, round-robin among equals. Async jobs wait in the fleet's
// queue, one queue per caller; the dispatcher (async.go) claims a slot
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
// Fleet-wide counts come from view, this node's copy of the index. It
// lags other nodes' writes by the index watch (milliseconds), so two
// nodes admitting at the same moment may overshoot a per-caller limit by
// about one execution each.
type admission struct {
	capacity, queueSize         int
	perKeyRunning, perKeyQueued int
	view                        fleetView

	mu         sync.Mutex
	running    int // slots in use on this node
	waiting    int // sync tickets in lines
	submitting int // async submissions admitted, not yet recorded
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

// fleetView counts the executions of the whole fleet.
type fleetView interface {
	// running and pending count key's executions with that status.
	running(key string) int
	pending(key string) int
	// queuedAsync returns the callers with async jobs waiting, and how
	// many jobs wait in all.
	queuedAsync() (keys []string, total int)
}

// keyLine is one caller's share of this node.
type keyLine struct {
	running    int // slots of this node
	submitting int
	line       []*ticket // sync callers waiting here
}

// ticket is one execution's slot, or its place in its caller's line.
type ticket struct {
	adm     *admission
	key     string
	granted chan struct{} // closed when the slot is the ticket's
	taking  bool          // an async job's slot, counted in admission.taking
}

func newAdmission(capacity, queueSize, perKeyRunning, perKeyQueued int, view fleetView) *admission {
	return &admission{capacity: capacity, queueSize: queueSize, perKeyRunning: perKeyRunning,
		perKeyQueued: perKeyQueued, view: view, keys: make(map[string]*keyLine), changed: make(chan struct{})}
}

func (a *admission) lineLocked(key string) *keyLine {
	k := a.keys[key]
	if k == nil {
		k = &keyLine{}
		a.keys[key] = k
	}
	return k
}

// forgetLocked drops a caller's entry once nothing of it is left.
func (a *admission) forgetLocked(key string) {
	if k := a.keys[key]; k != nil && k.running == 0 && k.submitting == 0 && len(k.line) == 0 {
		delete(a.keys, key)
	}
}

// wakeLocked tells the dispatcher that something changed.
func (a *admission) wakeLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// runningLocked is how many executions of key run: the fleet's count, or
// this node's if higher (a slot is taken before its record says running).
func (a *admission) runningLocked(key string) int {
	n := a.view.running(key)
	if k := a.keys[key]; k != nil {
		n = max(n, k.running)
	}
	return n
}

// queuedLocked is how many executions of key wait fleet-wide, counting
// this node's admissions not yet recorded.
func (a *admission) queuedLocked(key string) int {
	n := a.view.pending(key)
	if k := a.keys[key]; k != nil {
		n = max(n, len(k.line)) + k.submitting
	}
	return n
}

func (a *admission) underRunCap(key string) bool {
	return a.perKeyRunning == 0 || a.runningLocked(key) < a.perKeyRunning
}

// admitLocked checks the node's and key's limits for one more waiting
// execution of key.
func (a *admission) admitLocked(key string) error {
	if a.closed {
		return ErrClosed
	}
	if a.running-a.claimed+a.waiting+a.submitting+a.queuedAsyncLocked() >= a.capacity+a.queueSize {
		return ErrOverloaded
	}
	if n := a.queuedLocked(key); a.perKeyQueued > 0 && n >= a.perKeyQueued {
		return fmt.Errorf("%w: %q has %d executions waiting, the most one key may have (--max-queued-per-key)",
			ErrKeyOverloaded, key, n)
	}
	return nil
}

// enterSync admits a sync execution of key. The slot may be granted at
// once or later; wait for it with ticket.wait.
func (a *admission) enterSync(key string) (*ticket, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	if t := a.grantLocked(key); t != nil {
		return t, nil
	}
	t := &ticket{adm: a, key: key, granted: make(chan struct{})}
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

// trySync grants key a slot for a sync execution if one is free for it
// now, and returns nil (taking nothing) otherwise.
func (a *admission) trySync(key string) (*ticket, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	return a.grantLocked(key), nil
}

// grantLocked gives key a slot if one is free for it and no sync caller
// waits, else returns nil.
func (a *admission) grantLocked(key string) *ticket {
	if a.running >= a.capacity || a.waiting > 0 || !a.underRunCap(key) {
		return nil
	}
	t := &ticket{adm: a, key: key, granted: make(chan struct{})}
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
func (a *admission) scheduleLocked() {
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

// poke grants what the fleet's counts allow now (another node's
// execution of a capped caller ended).
func (a *admission) poke() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.scheduleLocked()
}

// wait blocks until the slot is granted or ctx ends. On success the caller
// owns a slot and must call release.
func (t *ticket) wait(ctx context.Context) error {
	select {
	case <-t.granted:
		return nil
	case <-ctx.Done():
	}
	// Granted or not, the caller will not run: hand back what it holds.
	t.abandon()
	return context.Cause(ctx)
}

// abandon gives the ticket back without running: the slot if it was
// granted, else the place in line.
func (t *ticket) abandon() {
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

func (a *admission) dropTurnLocked(key string) {
	for i, o := range a.order {
		if o == key {
			a.order = append(a.order[:i], a.order[i+1:]...)
			return
		}
	}
}

// release frees the ticket's slot for the next line in turn.
func (t *ticket) release() {
	a := t.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	t.recordedLocked()
	a.releaseLocked(t.key)
}

// recorded ends the double count of an async job's slot (taking) once
// its record says running, or when it ends without.
func (t *ticket) recorded() {
	a := t.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	t.recordedLocked()
}

func (t *ticket) recordedLocked() {
	if t.taking {
		t.taking = false
		t.adm.taking--
	}
}

// queuedAsyncLocked is how many async jobs wait fleet-wide, less the ones
// this node has taken whose records still say pending (already counted in
// running).
func (a *admission) queuedAsyncLocked() int {
	_, async := a.view.queuedAsync()
	return max(0, async-a.taking)
}

func (a *admission) releaseLocked(key string) {
	a.keys[key].running--
	a.running--
	a.forgetLocked(key)
	a.scheduleLocked()
	a.wakeLocked()
}

// reserveAsync counts a job of key about to be recorded and queued.
func (a *admission) reserveAsync(key string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.admitLocked(key); err != nil {
		return err
	}
	a.submitting++
	a.lineLocked(key).submitting++
	return nil
}

// submitted ends the count of reserveAsync: the job's record is in the
// index, which counts it from now on, or it was refused.
func (a *admission) submitted(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.submitting--
	a.lineLocked(key).submitting--
	a.forgetLocked(key)
}

// queued wakes the dispatcher for a job just queued here.
func (a *admission) queued() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.wakeLocked()
}

// claim takes a free slot for an async job when no sync caller waits
// here and some caller has jobs queued, and returns the callers to try in
// order (see asyncOrderLocked). It returns none, and takes no slot, when
// there is nothing to do; changed is closed once that may be different.
func (a *admission) claim() (keys []string, changed <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.running >= a.capacity || a.waiting > 0 {
		return nil, a.changed
	}
	if _, total := a.view.queuedAsync(); total <= a.taking {
		return nil, a.changed // the queued jobs listed are the ones taken here
	}
	keys = a.asyncOrderLocked()
	if len(keys) > 0 {
		a.running++
		a.claimed++
	}
	return keys, a.changed
}

// unclaim gives back a claimed slot no job was taken for.
func (a *admission) unclaim() {
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
func (a *admission) asyncOrderLocked() []string {
	keys, _ := a.view.queuedAsync()
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

// startAsync makes a claimed slot key's, whose job was taken.
func (a *admission) startAsync(key string) *ticket {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lineLocked(key).running++
	a.claimed--
	a.taking++
	a.lastAsync = key
	t := &ticket{adm: a, key: key, granted: make(chan struct{}), taking: true}
	close(t.granted)
	return t
}

// close refuses new admissions and claims. Callers already waiting are
// stopped by the engine through their context.
func (a *admission) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	a.wakeLocked()
}

// stats returns this node's running executions and the executions
// waiting: its sync callers and the fleet's queued async jobs.
func (a *admission) stats() (running, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running - a.claimed, a.waiting + a.submitting + a.queuedAsyncLocked()
}
