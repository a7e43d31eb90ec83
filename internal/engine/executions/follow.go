package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/store"
)

// storedEvent is an event as published; the follower numbers them.
type storedEvent struct {
	Type EventType `json:"type"`
	Data string    `json:"data"`
	Time time.Time `json:"time"`
}

func encodeEvent(typ EventType, data string, t time.Time) ([]byte, error) {
	b, err := json.Marshal(storedEvent{Type: typ, Data: data, Time: t})
	if err != nil {
		return nil, fmt.Errorf("engine: encoding event: %w", err)
	}
	return b, nil
}

// followIdle is how long a follower waits without events before it checks
// whether the execution ended without a final status event (its node died
// between writing the record and publishing the event).
const followIdle = 500 * time.Millisecond

// Follow streams the events of an execution: every stored one with a Seq
// above afterSeq, then live ones. The channel is closed after the final
// status event, or when ctx ends or the service closes. The engine
// checked that the execution exists and is the caller's.
//
// What a follower holds is bounded by a few events, whatever the length of
// the stream: events are pulled from the store a small batch at a time as
// the receiver takes them (store.FollowEvents), and handed over one at a
// time. A receiver that reads slowly only delays its own stream.
func (e *Service) Follow(ctx context.Context, id string, afterSeq uint64) (<-chan Event, error) {
	// A follower ends when the service closes, which waits for it.
	unhold, err := e.hold()
	if err != nil {
		return nil, err
	}
	fctx, cancel := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(e.stopping, cancel)
	msgs, err := e.st.FollowEvents(fctx, id)
	if err != nil {
		stopOnClose()
		cancel()
		unhold()
		return nil, fmt.Errorf("engine: following %s: %w", id, err)
	}
	out := make(chan Event)
	go func() {
		defer unhold()
		defer stopOnClose()
		defer cancel()
		defer close(out)
		f := follower{e: e, id: id, after: afterSeq, out: out}
		f.run(fctx, msgs)
	}()
	return out, nil
}

// follower is the state of one Follow.
type follower struct {
	e         *Service
	id        string
	after     uint64
	out       chan<- Event
	seq       uint64 // of the last event seen
	streamSeq uint64 // its position in the events stream
}

func (f *follower) run(ctx context.Context, msgs <-chan store.EventMsg) {
	idle := time.NewTimer(followIdle)
	defer idle.Stop()
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return
			}
			f.seq, f.streamSeq = m.Seq, m.StreamSeq
			var se storedEvent
			if err := json.Unmarshal(m.Data, &se); err != nil {
				f.e.log.Warn("skipping undecodable event", "execution_id", f.id, "seq", m.Seq, "err", err)
				continue
			}
			if !f.send(ctx, Event{Seq: m.Seq, Type: se.Type, Data: se.Data, Time: se.Time}) {
				return
			}
			if se.Type == EventStatus && run.Status(se.Data).Final() {
				return
			}
			idle.Reset(followIdle)
		case <-idle.C:
			if f.endedSilently(ctx) {
				return
			}
			idle.Reset(followIdle)
		case <-ctx.Done():
			return
		}
	}
}

// endedSilently handles an execution whose record is final although no
// final status event arrived: once every stored event was delivered, it
// sends the final status from the record and reports true.
//
// The sent status is the one the final status event carries, time
// included (ended), so a follower sees the same sequence either way.
func (f *follower) endedSilently(ctx context.Context) bool {
	// Events not yet delivered mean more is coming; that answer costs
	// less than reading the record, which may hold megabytes of output.
	if f.eventsAhead(ctx) {
		return false
	}
	r, err := f.e.peek(ctx, f.id)
	if err != nil || !r.Status.Final() || f.eventsAhead(ctx) {
		return false
	}
	t := run.Now()
	if r.FinishedAt != nil {
		t = *r.FinishedAt
	}
	f.send(ctx, Event{Seq: f.seq + 1, Type: EventStatus, Data: string(r.Status), Time: t})
	return true
}

// eventsAhead reports whether the store holds events of the execution
// that the follower has not seen yet (or cannot tell).
func (f *follower) eventsAhead(ctx context.Context) bool {
	last, err := f.e.st.LastEvent(ctx, f.id)
	return err != nil || last > f.streamSeq
}

func (f *follower) send(ctx context.Context, ev Event) bool {
	if ev.Seq <= f.after {
		return true
	}
	select {
	case f.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// recordHead is the part of a record that followers read.
type recordHead struct {
	Status     run.Status `json:"status"`
	FinishedAt *time.Time `json:"finished_at"`
}

// maxPeeks bounds the record reads of followers in progress at once. The
// store returns a record whole, output included (up to its record limit),
// so many followers arriving together at a finished execution would
// otherwise each hold a copy at the same time.
const maxPeeks = 2

// peek reads the status of a record without keeping its output: only the
// head is decoded, and at most maxPeeks reads are in progress at once.
// ErrNotFound when there is no record.
func (e *Service) peek(ctx context.Context, id string) (recordHead, error) {
	select {
	case e.peeks <- struct{}{}:
		defer func() { <-e.peeks }()
	case <-ctx.Done():
		return recordHead{}, ctx.Err()
	}
	ent, err := e.st.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return recordHead{}, fmt.Errorf("%w: %s", run.ErrNotFound, id)
	}
	if err != nil {
		return recordHead{}, fmt.Errorf("engine: loading %s: %w", id, err)
	}
	var h recordHead
	if err := json.Unmarshal(ent.Value, &h); err != nil {
		return recordHead{}, fmt.Errorf("engine: decoding record %s: %w", id, err)
	}
	return h, nil
}
