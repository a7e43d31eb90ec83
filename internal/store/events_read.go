package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// EventReader reads the stored events of an execution without following
// it.
type EventReader interface {
	ReadEvents(ctx context.Context, id string, fn func(EventMsg) error) error
}

var _ EventReader = (*NATS)(nil)

// ReadEvents calls fn with every stored event of id, in order, one at a
// time: what it holds at once is one event, whatever the execution wrote.
// It reads the events stored when it starts and stops there, so it ends
// even while the execution still publishes.
//
// Cost: one direct read per event, each answered from the stream's
// per-subject index without reading other executions' events.
func (s *NATS) ReadEvents(ctx context.Context, id string, fn func(EventMsg) error) error {
	subject := EventsPrefix + id
	last, err := s.LastEvent(ctx, id)
	if err != nil || last == 0 {
		return err
	}
	var n uint64
	for seq := uint64(1); seq <= last; {
		msg, err := s.events.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: reading events of %s: %w", id, err)
		}
		if msg.Sequence > last {
			return nil
		}
		n++
		data, err := s.eventData(ctx, msg.Header, msg.Data)
		if err != nil {
			return fmt.Errorf("store: reading events of %s: %w", id, err)
		}
		if err := fn(EventMsg{Seq: n, Data: data, Time: msg.Time, StreamSeq: msg.Sequence}); err != nil {
			return err
		}
		seq = msg.Sequence + 1
	}
	return nil
}
