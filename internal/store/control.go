package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// HandleControl subscribes this node to the control subject of id, so
// that a SendControl from any node reaches the handler. The subscription
// is per execution: when no node runs id, SendControl learns it at once
// from the server instead of waiting for a timeout.
func (s *NATS) HandleControl(id string, h ControlHandler) (func() error, error) {
	sub, err := s.nc.Subscribe(ControlPrefix+id, func(m *nats.Msg) {
		// A failed reply shows up as a timeout at the sender, which then
		// re-reads the record; nothing more to do here.
		_ = m.Respond(h(m.Data))
	})
	if err != nil {
		return nil, fmt.Errorf("store: subscribing to control of %s: %w", id, err)
	}
	// Flush makes sure the server knows the subscription before the
	// caller announces that it owns id.
	if err := s.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("store: subscribing to control of %s: %w", id, err)
	}
	return sub.Unsubscribe, nil
}

// SendControl sends data to the owner of id and waits for its reply until
// ctx ends.
func (s *NATS) SendControl(ctx context.Context, id string, data []byte) ([]byte, error) {
	msg, err := s.nc.RequestWithContext(ctx, ControlPrefix+id, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("store: control of %s: %w", id, ErrNoOwner)
	}
	if err != nil {
		return nil, fmt.Errorf("store: control of %s: %w", id, err)
	}
	return msg.Data, nil
}
