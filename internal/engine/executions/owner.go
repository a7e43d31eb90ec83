package executions

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
)

// owner is this node's hold on an execution it runs or holds in line: the
// way to stop it, and how it ended. While an owner exists, its control
// subject is answered (see kill.go), which is how Kill and recovery on any
// node learn that the execution is alive.
type owner struct {
	e       *Service
	id      string
	cancel  context.CancelCauseFunc
	running atomic.Bool
	// starting is set (under e.mu) once the execution may start: Close
	// then leaves it to finish within the drain. shut is set (under e.mu)
	// when Close stopped it before that: it must not start at all.
	starting, shut bool
	done           chan struct{}
	final          run.Status // set before done is closed
	stop           func() error
	// freeSlot gives back the admission slot the execution runs in; nil
	// while it holds none. It is safe to call more than once (slotFree):
	// the run calls it right before it records the outcome (endRun), the
	// caller that holds the slot on every way out.
	freeSlot func()
}

// slotFree returns the function that gives t, a granted slot, back: once,
// however often it is called.
func slotFree(t *admission.Ticket) func() { return sync.OnceFunc(t.Release) }

// endRun is called once the payload is gone, its jail given back, its
// workspace settled and its files saved, right before the outcome is
// recorded: the slot is free before anyone can see the execution final
// (a caller that waited for the end, or killed it, may submit again at
// once and find the slot).
func (o *owner) endRun() {
	if o.freeSlot != nil {
		o.freeSlot()
	}
}

// controlMsg is a control request; controlReply its answer.
type controlMsg struct {
	Op string `json:"op"` // "kill" or "ping"
}

type controlReply struct {
	// Status is the execution's status as its owner knows it; empty when
	// a kill did not finish within the owner's wait.
	Status run.Status `json:"status"`
}

const (
	opKill = "kill"
	opPing = "ping"
)

// errOwnedHere refuses to own an execution this node owns already: its
// job came back (the queue's ack wait) while this node starts it.
var errOwnedHere = errors.New("engine: the execution is already owned by this node")

// own registers this node as the owner of id. cancel stops the execution.
func (e *Service) own(id string, cancel context.CancelCauseFunc) (*owner, error) {
	o := &owner{e: e, id: id, cancel: cancel, done: make(chan struct{})}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, run.ErrClosed
	}
	if _, dup := e.owned[id]; dup {
		e.mu.Unlock()
		return nil, errOwnedHere
	}
	e.owned[id] = o
	e.owners.Add(1)
	e.mu.Unlock()
	stop, err := e.st.HandleControl(id, o.handle)
	if err != nil {
		e.mu.Lock()
		delete(e.owned, id)
		e.mu.Unlock()
		e.owners.Done()
		return nil, err
	}
	o.stop = stop
	return o, nil
}

// release records how the execution ended and gives up ownership.
func (o *owner) release(final run.Status) {
	o.final = final
	close(o.done)
	if err := o.stop(); err != nil {
		o.e.log.Warn("unsubscribing from control", "execution_id", o.id, "err", err)
	}
	o.e.mu.Lock()
	delete(o.e.owned, o.id)
	o.e.mu.Unlock()
	o.e.owners.Done()
}

func (o *owner) started() bool { return o.running.Load() }

// begin reports whether the execution may start: false once Close stopped
// it while it waited. From a true answer on, Close counts it as running,
// so an execution is either stopped before it starts or given the drain,
// never stopped as it starts.
func (o *owner) begin() bool {
	o.e.mu.Lock()
	defer o.e.mu.Unlock()
	if o.shut {
		return false
	}
	o.starting = true
	return true
}

// stopUnstarted stops the execution if it has not begun; the caller
// holds e.mu.
func (o *owner) stopUnstarted() {
	if !o.starting {
		o.shut = true
		o.cancel(errShutdown)
	}
}

// handle answers control requests. A kill cancels the execution and
// replies once its final state is recorded, so that the caller can report
// it; if that takes longer than KillWait it replies without a status.
func (o *owner) handle(data []byte) []byte {
	var m controlMsg
	if err := json.Unmarshal(data, &m); err != nil {
		o.e.log.Warn("ignoring malformed control message", "execution_id", o.id, "err", err)
		return nil
	}
	var reply controlReply
	switch m.Op {
	case opKill:
		o.cancel(errKilled)
		select {
		case <-o.done:
			reply.Status = o.final
		case <-time.After(o.e.cfg.KillWait):
		}
	case opPing:
		reply.Status = run.StatusPending
		if o.started() {
			reply.Status = run.StatusRunning
		}
	}
	b, err := json.Marshal(reply)
	if err != nil {
		o.e.log.Error("encoding control reply", "err", err)
	}
	return b
}
