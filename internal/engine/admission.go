package engine

import (
	"context"
	"sync"
	"time"
)

// admission bounds what this node runs and holds. Running executions take
// one of capacity slots; admitted executions wait as sync waiters (callers
// of RunSync, in FIFO order) or as async jobs in the shared work queue.
// When running+waiting reaches capacity+queueSize, new requests are
// refused with ErrOverloaded. Sync waiters go before queued async jobs:
// their caller holds a connection open.
//
// The async count is this node's view: it starts from the queue's depth
// and follows this node's submissions and dispatches. With several nodes
// on one queue it over-counts jobs that others took, which errs on the
// side of refusing.
type admission struct {
	capacity, queueSize int

	mu          sync.Mutex
	running     int
	waiters     []*ticket
	asyncQueued int
	closed      bool
	changed     chan struct{} // closed and replaced whenever a slot frees
}

// ticket is a sync caller's place in line.
type ticket struct {
	adm     *admission
	granted chan struct{} // closed when the slot is the caller's
}

func newAdmission(capacity, queueSize int) *admission {
	return &admission{capacity: capacity, queueSize: queueSize, changed: make(chan struct{})}
}

func (a *admission) fullLocked() bool {
	return a.running+len(a.waiters)+a.asyncQueued >= a.capacity+a.queueSize
}

// enterSync admits a sync execution. The slot may be granted at once or
// later; wait for it with ticket.wait.
func (a *admission) enterSync() (*ticket, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	t := &ticket{adm: a, granted: make(chan struct{})}
	if a.running < a.capacity && len(a.waiters) == 0 {
		a.running++
		close(t.granted)
		return t, nil
	}
	if a.fullLocked() {
		return nil, ErrOverloaded
	}
	a.waiters = append(a.waiters, t)
	return t, nil
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
	for i, w := range a.waiters {
		if w == t {
			a.waiters = append(a.waiters[:i], a.waiters[i+1:]...)
			return
		}
	}
	a.releaseLocked()
}

// reserveAsync counts a job about to be enqueued.
func (a *admission) reserveAsync() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	if a.fullLocked() {
		return ErrOverloaded
	}
	a.asyncQueued++
	return nil
}

// unreserveAsync forgets a job that was counted but never enqueued.
func (a *admission) unreserveAsync() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asyncQueued--
}

// setQueued sets the async count from the queue's depth at start.
func (a *admission) setQueued(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asyncQueued = n
}

// idle returns a channel that is closed once a slot is free for an async
// job (no sync caller waiting), or nil if one is free now.
func (a *admission) idle() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running < a.capacity && len(a.waiters) == 0 {
		return nil
	}
	return a.changed
}

// claimAsync takes a slot for a job taken from the queue, waiting for one
// if a sync caller got there first. tick is called every interval while it
// waits (to keep the job from being redelivered).
func (a *admission) claimAsync(ctx context.Context, interval time.Duration, tick func()) error {
	for {
		ch := a.tryClaim()
		if ch == nil {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(interval):
			tick()
		}
	}
}

func (a *admission) tryClaim() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running < a.capacity && len(a.waiters) == 0 {
		a.running++
		if a.asyncQueued > 0 {
			a.asyncQueued--
		}
		return nil
	}
	return a.changed
}

// release frees a slot: the first sync waiter gets it, else async
// dispatch is woken.
func (a *admission) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked()
}

func (a *admission) releaseLocked() {
	if len(a.waiters) > 0 {
		t := a.waiters[0]
		a.waiters = a.waiters[1:]
		close(t.granted)
		return
	}
	a.running--
	close(a.changed)
	a.changed = make(chan struct{})
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
	return a.running, len(a.waiters) + a.asyncQueued
}
