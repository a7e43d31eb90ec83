package engine

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/pyexec/pyexec/internal/egress"
)

// EventNetwork is a connection attempt or name lookup of the payload;
// Data is a NetworkEvent as JSON.
const EventNetwork EventType = "network"

// ReasonNetworkLimit ends an execution that went over one of its network
// limits (connections at once, bytes out, bytes in).
const ReasonNetworkLimit = "network_limit"

// NetworkEvent is one connection attempt or lookup, as the record, the
// stream and the audit trail show it (docs/network.md).
type NetworkEvent = egress.Event

// networkLimitError is the cause of an execution stopped by its egress.
type networkLimitError struct{ limit string }

func (e *networkLimitError) Error() string { return "network limit exceeded: " + e.limit }

// networkPolicy is the operator's policy narrowed by the request's allow
// list; an entry that does not parse is the request's error. An empty
// list is refused rather than read as "nothing" or "no list": the two
// meanings are far apart, and only the absent list means the operator's.
func (e *Engine) networkPolicy(req Request) (egress.Policy, error) {
	p := e.cfg.Network.Policy
	if req.NetworkAllow == nil {
		return p, nil
	}
	if len(req.NetworkAllow) == 0 {
		return egress.Policy{}, errors.New("an empty network allow list (leave it out for the server's list)")
	}
	rules, err := egress.ParseRules(req.NetworkAllow)
	if err != nil {
		return egress.Policy{}, err
	}
	return p.Narrow(rules), nil
}

// netLog keeps an execution's network events for its record.
type netLog struct {
	mu     sync.Mutex
	events []NetworkEvent
}

func (l *netLog) add(ev NetworkEvent) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
}

func (l *netLog) all() []NetworkEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]NetworkEvent(nil), l.events...)
}

// startEgress makes the egress of a network execution: its events go to
// the stream and the record, and going over a limit stops the execution
// with networkLimitError.
func (e *Engine) startEgress(sctx context.Context, o *owner, p *plan, log *netLog) *egress.Egress {
	return egress.New(*e.cfg.Network, p.network, egress.Hooks{
		Event: func(ev egress.Event) {
			log.add(ev)
			if b, err := json.Marshal(ev); err == nil {
				e.publishEvent(sctx, o.id, EventNetwork, string(b))
			}
		},
		Limit: func(limit string) { o.cancel(&networkLimitError{limit: limit}) },
	})
}
