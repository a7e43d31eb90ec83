package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// followBatch is how many events one follower may have requested from the
// server and not yet taken: its consumer pulls again only as the follower
// takes events, so a follower holds at most this many events (each at most
// an event's size, which the engine bounds) however long the stream is and
// however slowly it reads. A slow follower therefore slows only its own
// reads; the server does not buffer more for it. One at a time: with 60
// followers of a loud execution, two in flight each cost several MiB more
// peak RSS (bench/followers) and bought no visible speed.
const followBatch = 1

// followExpiry bounds each pull of a follower. A pull that went unanswered
// is replaced when it expires (nats.go's default is 30 s): under load the
// store's test saw a follower wait more than 9 s for an event already
// stored, once in a CI run and once in a local run beside other suites.
// With 5 s such a wait ends within 5 s; an idle follower costs one pull
// request every 5 s.
const followExpiry = 5 * time.Second

// PublishEvent appends an event of execution id. It returns once the
// events stream stored it, so a follower that starts later replays it.
// Data too large for a message is spilled (spill.go).
func (s *NATS) PublishEvent(ctx context.Context, id string, data []byte) error {
	m, err := s.eventMsg(ctx, id, data)
	if err == nil {
		_, err = s.js.PublishMsg(ctx, m)
	}
	if err != nil {
		return fmt.Errorf("store: publishing event of %s: %w", id, mapErr(err))
	}
	return nil
}

// PublishEvents appends events of execution id in order. They are sent
// back to back and then awaited together, so a batch costs about one round
// trip to the stream rather than one per event. It returns once every one
// was stored, or with the first error (events after a failed one may be
// stored or not).
func (s *NATS) PublishEvents(ctx context.Context, id string, data [][]byte) error {
	acks := make([]jetstream.PubAckFuture, 0, len(data))
	for _, d := range data {
		m, err := s.eventMsg(ctx, id, d)
		if err != nil {
			return fmt.Errorf("store: publishing events of %s: %w", id, mapErr(err))
		}
		ack, err := s.js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("store: publishing events of %s: %w", id, mapErr(err))
		}
		acks = append(acks, ack)
	}
	for _, ack := range acks {
		select {
		case <-ack.Ok():
		case err := <-ack.Err():
			return fmt.Errorf("store: publishing events of %s: %w", id, mapErr(err))
		case <-ctx.Done():
			return fmt.Errorf("store: publishing events of %s: %w", id, ctx.Err())
		}
	}
	return nil
}

// FollowEvents replays the events of id from the first one and then
// delivers new ones live, through an ordered consumer that the server
// cleans up when the follower goes away. The consumer runs on the
// followers' connection (FollowersOn), so that followers never queue
// ahead of record writes, and pulls followBatch events at a time.
//
// Cost: the consumer filters the events stream by subject, which the
// server answers from its per-subject index without reading other
// executions' events.
func (s *NATS) FollowEvents(ctx context.Context, id string) (<-chan EventMsg, error) {
	cons, err := s.followJS.OrderedConsumer(ctx, EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{EventsPrefix + id},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("store: following events of %s: %w", id, err)
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(followBatch), jetstream.PullExpiry(followExpiry))
	if err != nil {
		return nil, fmt.Errorf("store: following events of %s: %w", id, err)
	}
	// Unbuffered: the next event is pulled from the iterator only once the
	// follower took this one.
	out := make(chan EventMsg)
	stopped := make(chan struct{})
	go func() {
		// Stop unblocks iter.Next below once the follower is gone.
		select {
		case <-ctx.Done():
		case <-stopped:
		}
		iter.Stop()
	}()
	go func() {
		defer close(out)
		defer close(stopped)
		var seq uint64
		for {
			msg, err := iter.Next()
			if err != nil {
				return // ErrMsgIteratorClosed after Stop, or the connection closed
			}
			meta, err := msg.Metadata()
			if err != nil {
				return
			}
			seq++
			data, err := s.eventData(ctx, msg.Headers(), msg.Data())
			if err != nil {
				continue // its spilled data expired before the event: nothing to show
			}
			ev := EventMsg{Seq: seq, Data: data, Time: meta.Timestamp, StreamSeq: meta.Sequence.Stream}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// LastEvent returns the stream sequence of the newest event of id, 0 when
// it has none.
func (s *NATS) LastEvent(ctx context.Context, id string) (uint64, error) {
	msg, err := s.events.GetLastMsgForSubject(ctx, EventsPrefix+id)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: reading last event of %s: %w", id, err)
	}
	return msg.Sequence, nil
}
