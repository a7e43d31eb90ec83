package executions

import (
	"context"
	"encoding/json"
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
