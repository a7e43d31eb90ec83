package engine

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// admission bounds what this node runs and holds, and shares its slots
// fairly among callers (API keys). Running executions take one of
// capacity slots; admitted executions wait in line: sync callers of
// RunSync, and async jobs this node took from the shared work queue and
// holds until a slot is theirs. Each caller has a line of its own; a free
// slot goes to the line of the caller running the fewest executions,
// round-robin among equals, so a caller with many waiting executions
// cannot hold back another's: a newcomer gets the next slot that frees. Within a line, sync callers go before async jobs (their caller
// holds a connection open), then first come, first served.
//
// Limits: when running+waiting reaches capacity+queueSize, new requests
// are refused with ErrOverloaded. Per caller, at most perKeyRunning run at
// once (the rest wait even if slots are free) and at most perKeyQueued
// wait; beyond, ErrOverloaded naming the caller's limit. Zero means no
// per-caller limit beyond the node's.
//
// The async count is this node's view: it starts from the queue's depth
// and follows this node's submissions and dispatches. With several nodes
// on one queue it over-counts jobs that others took, which errs on the
// side of refusing. Per caller it counts only submissions made since this
// node started.
type admission struct {
	capacity, queueSize         int
	perKeyRunning, perKeyQueued int

	mu          sync.Mutex
	running     int
	waiting     int                 // tickets in lines
	asyncQueued int                 // async jobs queued but not yet held in a line
	held        int                 // async tickets in lines
	keys        map[string]*keyLine // callers with work running or waiting
	order       []string            // callers with a non-empty line, in turn order
	closed      bool
	changed     chan struct{} // closed and replaced whenever a held job may be taken
}

// keyLine is one caller's share of the node.
type keyLine struct {
	running int
	queued  int // waiting tickets plus submitted async jobs not yet held
	line    []*ticket
}

// ticket is one execution's place in its caller's line.
type ticket struct {
	adm     *admission
	key     string
	async   bool
	granted chan struct{} // closed when the slot is the ticket's
}

func newAdmission(capacity, queueSize, perKeyRunning, perKeyQueued int) *admission {
	return &admission{capacity: capacity, queueSize: queueSize, perKeyRunning: perKeyRunning,
		perKeyQueued: perKeyQueued, keys: make(map[string]*keyLine), changed: make(chan struct{})}
}

func (a *admission) fullLocked() bool {
	return a.running+a.waiting+a.asyncQueued >= a.capacity+a.queueSize
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
	if k := a.keys[key]; k != nil && k.running == 0 && k.queued == 0 && len(k.line) == 0 {
		delete(a.keys, key)
	}
}

// admitLocked checks the node's and key's limits for one more waiting
// execution of key.
func (a *admission) admitLocked(key string) error {
	if a.closed {
		return ErrClosed
	}
	if a.fullLocked() {
		return ErrOverloaded
	}
	if k := a.keys[key]; a.perKeyQueued > 0 && k != nil && k.queued >= a.perKeyQueued {
		return fmt.Errorf("%w: %q has %d executions waiting, the most one key may have on this server (--max-queued-per-key)",
			ErrKeyOverloaded, key, k.queued)
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
	t := &ticket{adm: a, key: key, granted: make(chan struct{})}
	k := a.keys[key]
	if a.running < a.capacity && a.waiting == 0 && (k == nil || a.underRunCap(k)) {
		a.lineLocked(key).running++
		a.running++
		close(t.granted)
		return t, nil
	}
	if err := a.admitLocked(key); err != nil {
		return nil, err
	}
	k = a.lineLocked(key)
	k.queued++
	// Sync tickets go after the line's sync tickets, before its async ones.
	i := 0
	for i < len(k.line) && !k.line[i].async {
		i++
	}
	k.line = append(k.line[:i], append([]*ticket{t}, k.line[i:]...)...)
	a.waiting++
	if len(k.line) == 1 {
		a.order = append(a.order, key)
	}
	a.scheduleLocked()
	return t, nil
}

func (a *admission) underRunCap(k *keyLine) bool {
	return a.perKeyRunning == 0 || k.running < a.perKeyRunning
}

// scheduleLocked grants free slots to the lines in turn: each slot goes
// to the line whose caller runs the fewest executions now, the earliest
// in the turn order among equals; the served line goes to the back. A
// caller that just arrived thus gets the next free slot, however long
// another's line. A line whose caller is at its running limit is skipped
// and keeps its turn.
func (a *admission) scheduleLocked() {
	for a.running < a.capacity {
		pick := -1
		for i, key := range a.order {
			k := a.keys[key]
			if a.underRunCap(k) && (pick < 0 || k.running < a.keys[a.order[pick]].running) {
				pick = i
			}
		}
		if pick < 0 {
			return
		}
		key := a.order[pick]
		k := a.keys[key]
		t := k.line[0]
		k.line = k.line[1:]
		k.queued--
		k.running++
		a.running++
		a.waiting--
		if t.async {
			a.unholdLocked()
		}
		close(t.granted)
		a.order = append(a.order[:pick], a.order[pick+1:]...)
		if len(k.line) > 0 {
			a.order = append(a.order, key)
		}
	}
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

// waitAsync is wait for a held job: tick is called every interval while
// it waits (to keep the job from being redelivered).
func (t *ticket) waitAsync(ctx context.Context, interval time.Duration, tick func()) error {
	for {
		select {
		case <-t.granted:
			return nil
		case <-ctx.Done():
			t.abandon()
			return context.Cause(ctx)
		case <-time.After(interval):
			tick()
		}
	}
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
			k.queued--
			a.waiting--
			if t.async {
				a.unholdLocked()
			}
			if len(k.line) == 0 {
				a.dropTurnLocked(t.key)
			}
			a.forgetLocked(t.key)
			return
		}
	}
	a.releaseLocked(t.key)
}

// unholdLocked counts one held job less and wakes the dispatcher.
func (a *admission) unholdLocked() {
	a.held--
	close(a.changed)
	a.changed = make(chan struct{})
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
	a.releaseLocked(t.key)
}

func (a *admission) releaseLocked(key string) {
	a.keys[key].running--
	a.running--
	a.forgetLocked(key)
	a.scheduleLocked()
}

// reserveAsync counts a job of key about to be enqueued.
func (a *admission) reserveAsync(key string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.admitLocked(key); err != nil {
		return err
	}
	a.asyncQueued++
	a.lineLocked(key).queued++
	return nil
}

// unreserveAsync forgets a job of key that was counted but never enqueued.
func (a *admission) unreserveAsync(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asyncQueued--
	a.lineLocked(key).queued--
	a.forgetLocked(key)
}

// setQueued sets the async count from the queue's depth at start.
func (a *admission) setQueued(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asyncQueued = n
}

// room returns a channel that is closed once this node may hold another
// async job in line, or nil if it may now. The node holds at most
// capacity+queueSize jobs, so every job admitted here can be held and
// served in turn, whatever the order of the queue.
func (a *admission) room() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held < a.capacity+a.queueSize {
		return nil
	}
	return a.changed
}

// holdAsync puts a job of key taken from the queue in its caller's line.
// The job was admitted when submitted, so no limit applies again.
func (a *admission) holdAsync(key string) *ticket {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &ticket{adm: a, key: key, async: true, granted: make(chan struct{})}
	if a.asyncQueued > 0 {
		a.asyncQueued--
	}
	k := a.lineLocked(key)
	if k.queued == len(k.line) {
		// Not counted at submission (queued before this node started).
		k.queued++
	}
	k.line = append(k.line, t)
	a.waiting++
	a.held++
	if len(k.line) == 1 {
		a.order = append(a.order, key)
	}
	a.scheduleLocked()
	return t
}

// close refuses new admissions. Callers already waiting are stopped by the
// engine through their context.
func (a *admission) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
}

// stats returns running, queued.
func (a *admission) stats() (running, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running, a.waiting + a.asyncQueued
}
