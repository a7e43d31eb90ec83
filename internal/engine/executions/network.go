package executions

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/engine/run"
)

// EventNetwork is a connection attempt or name lookup of the payload;
// Data is a NetworkEvent as JSON.
const EventNetwork EventType = "network"

// networkLimitError is the cause of an execution stopped by its egress.
type networkLimitError struct{ limit string }

func (e *networkLimitError) Error() string { return "network limit exceeded: " + e.limit }

// netLog keeps an execution's network events for its record.
type netLog struct {
	mu     sync.Mutex
	events []run.NetworkEvent
}

func (l *netLog) add(ev run.NetworkEvent) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
}

func (l *netLog) all() []run.NetworkEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]run.NetworkEvent(nil), l.events...)
}

// startEgress makes the egress of a network execution: its events go to
// the stream and the record, and going over a limit stops the execution
// with networkLimitError.
func (e *Service) startEgress(sctx context.Context, o *owner, p *run.Plan, log *netLog) *egress.Egress {
	cfg := *e.cfg.Run.Network
	cfg.HTTPRules = p.HTTPRules
	return egress.New(cfg, egress.Grant{Policy: p.Network, Secrets: p.Secrets}, egress.Hooks{
		Event: func(ev egress.Event) {
			log.add(ev)
			if b, err := json.Marshal(ev); err == nil {
				e.publishEvent(sctx, o.id, EventNetwork, string(b))
			}
		},
		Limit: func(limit string) { o.cancel(&networkLimitError{limit: limit}) },
	})
}

// maxTeardowns bounds the egresses whose teardown runs after their
// execution's answer (teardowns); past it an execution waits for its own.
const maxTeardowns = 8

// teardowns runs, after the answer, what is left of the egresses of
// executions that are over (egress.Egress.Finish): removing a TUN device
// costs the kernel tens of milliseconds, which the execution's record and
// response need not wait for. By then the payload's processes are gone
// and the egress relays nothing; the device dies with the namespace it
// keeps alive. Wait waits for every teardown, so that nothing outlives
// the service, unless Abort gave up on them (a teardown stuck in the
// kernel): the process's exit then closes what is left.
type teardowns struct {
	log  *slog.Logger
	wg   sync.WaitGroup
	busy chan struct{} // one per teardown running (maxTeardowns)

	mu       sync.Mutex
	running  map[string]int // executions whose teardown runs in the background
	given    chan struct{}  // closed by giveUp
	giveOnce sync.Once
}

func newTeardowns(log *slog.Logger) *teardowns {
	return &teardowns{log: log, busy: make(chan struct{}, maxTeardowns), running: map[string]int{}, given: make(chan struct{})}
}

// finisher is an egress whose part in its execution can end ahead of its
// teardown (egress.Egress.Finish).
type finisher interface {
	Finish() (teardown func() error)
}

// finish ends eg's part in execution id (its last events are out when it
// returns) and tears it down in the background, or before returning when
// maxTeardowns are already running.
func (t *teardowns) finish(id string, eg finisher) {
	teardown := eg.Finish()
	run := func() {
		if err := teardown(); err != nil {
			t.log.Warn("closing an egress", "execution_id", id, "err", err)
		}
	}
	select {
	case t.busy <- struct{}{}:
	default:
		run()
		return
	}
	t.wg.Add(1)
	t.mu.Lock()
	t.running[id]++
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		defer func() { <-t.busy }()
		run()
		t.mu.Lock()
		if t.running[id]--; t.running[id] == 0 {
			delete(t.running, id)
		}
		t.mu.Unlock()
	}()
}

// wait returns once every teardown started is over, or once giveUp was
// called, saying which are left.
func (t *teardowns) wait() {
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-t.given:
		t.mu.Lock()
		left := slices.Sorted(maps.Keys(t.running))
		t.mu.Unlock()
		if len(left) > 0 {
			t.log.Warn("stopping with egress teardowns still running", "execution_ids", left)
		}
	}
}

// giveUp makes wait return without waiting for the teardowns left.
func (t *teardowns) giveUp() { t.giveOnce.Do(func() { close(t.given) }) }
