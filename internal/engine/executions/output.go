package executions

import (
	"context"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// outputEvents turns the payload's writes into stdout/stderr events. Small
// writes are coalesced: a chunk is published every interval, or sooner
// once maxBytes are pending, so that a payload printing in a tight loop
// creates a few messages per second, not millions. No event carries more
// than maxBytes: what piled up while a publish was slow goes out in
// several, so that a follower's memory, a few events, stays small. Writes
// never wait for a publish; what is pending is bounded by the jail's
// output limits.
type outputEvents struct {
	interval time.Duration
	maxBytes int
	publish  func([]Event) // Type and Data set; returns once published

	mu      sync.Mutex
	pending []chunk
	size    int
	kick    chan struct{} // size reached maxBytes
	stop    chan struct{}
	done    chan struct{}
	carry   [3][]byte // per stream: a split UTF-8 sequence held for the next chunk
}

type chunk struct {
	stream sandbox.Stream
	data   []byte
}

func newOutputEvents(interval time.Duration, maxBytes int, publish func([]Event)) *outputEvents {
	o := &outputEvents{
		interval: interval,
		maxBytes: maxBytes,
		publish:  publish,
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go o.loop()
	return o
}

// write is the jail's OutputFunc.
func (o *outputEvents) write(s sandbox.Stream, p []byte) {
	o.mu.Lock()
	// A chunk grows up to maxBytes, then the next one starts: a backlog is
	// a list of event-sized pieces, not one buffer regrown (and copied)
	// as it piles up.
	if n := len(o.pending); n > 0 && o.pending[n-1].stream == s && len(o.pending[n-1].data)+len(p) <= o.maxBytes {
		o.pending[n-1].data = append(o.pending[n-1].data, p...)
	} else {
		o.pending = append(o.pending, chunk{stream: s, data: append([]byte(nil), p...)})
	}
	o.size += len(p)
	full := o.size >= o.maxBytes
	o.mu.Unlock()
	if full {
		select {
		case o.kick <- struct{}{}:
		default:
		}
	}
}

// close publishes what is pending and stops; no write may follow.
func (o *outputEvents) close() {
	close(o.stop)
	<-o.done
}

func (o *outputEvents) loop() {
	defer close(o.done)
	t := time.NewTicker(o.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-o.kick:
		case <-o.stop:
			o.flush(true)
			return
		}
		o.flush(false)
	}
}

// flushGroup is the most events one publish carries. A backlog that piled
// up while the store was slow goes out a group at a time, so that only
// one group exists as events (and as their JSON) at once rather than the
// whole backlog in each form.
const flushGroup = 8

// flush publishes the pending chunks in order, in groups of events. A
// multi-byte character split across writes is held back until its end
// arrives, so every event is valid UTF-8 where the output is.
func (o *outputEvents) flush(final bool) {
	o.mu.Lock()
	chunks := o.pending
	o.pending, o.size = nil, 0
	o.mu.Unlock()
	b := batch{publish: o.publish}
	for i, c := range chunks {
		chunks[i].data = nil // published below; not kept until the whole backlog is
		data := c.data
		if len(o.carry[c.stream]) > 0 {
			data = append(o.carry[c.stream], data...)
		}
		cut := len(data)
		if !final {
			cut = completeUTF8(data)
		}
		o.carry[c.stream] = append([]byte(nil), data[cut:]...)
		o.split(&b, streamEvent(c.stream), data[:cut])
	}
	if final {
		for s, rest := range o.carry {
			o.split(&b, streamEvent(sandbox.Stream(s)), rest)
		}
	}
	b.flush()
}

// batch collects events and publishes them flushGroup at a time.
type batch struct {
	publish func([]Event)
	events  []Event
}

func (b *batch) add(ev Event) {
	b.events = append(b.events, ev)
	if len(b.events) == flushGroup {
		b.flush()
	}
}

func (b *batch) flush() {
	if len(b.events) > 0 {
		b.publish(b.events)
		b.events = nil
	}
}

// split adds data to b as events of at most maxBytes each, cut between
// UTF-8 sequences where the output is UTF-8.
func (o *outputEvents) split(b *batch, typ EventType, data []byte) {
	for len(data) > 0 {
		n := len(data)
		if n > o.maxBytes {
			n = completeUTF8(data[:o.maxBytes])
			if n == 0 { // a cap below one character: the character goes whole
				_, n = utf8.DecodeRune(data)
			}
		}
		b.add(Event{Type: typ, Data: string(data[:n])})
		data = data[n:]
	}
}

// completeUTF8 returns the length of the longest prefix of b that does not
// end inside a UTF-8 sequence.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}

func streamEvent(s sandbox.Stream) EventType {
	if s == sandbox.Stderr {
		return EventStderr
	}
	return EventStdout
}

// publishEvents appends events of an execution in order, pipelined (see
// store.PublishEvents); a failure is logged as publishEvent's is.
func (e *Service) publishEvents(ctx context.Context, id string, evs []Event) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	data := make([][]byte, 0, len(evs))
	t := run.Now()
	for _, ev := range evs {
		b, err := encodeEvent(ev.Type, ev.Data, t)
		if err != nil {
			e.log.Warn("publishing events", "execution_id", id, "err", err)
			return err
		}
		data = append(data, b)
	}
	err := e.st.PublishEvents(ctx, id, data)
	if err != nil {
		e.log.Warn("publishing events", "execution_id", id, "count", len(evs), "err", err)
	}
	return err
}

// publishEvent appends one event of an execution. Events are the live view;
// the record is the truth, so a failed publish is logged, not fatal.
func (e *Service) publishEvent(ctx context.Context, id string, typ EventType, data string) {
	e.publishEventAt(ctx, id, typ, data, run.Now())
}

// publishEventAt is publishEvent for an event that happened at t.
func (e *Service) publishEventAt(ctx context.Context, id string, typ EventType, data string, t time.Time) {
	// Each event gets the store's deadline from now: a long run publishes
	// its last events well after its first.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	b, err := encodeEvent(typ, data, t)
	if err == nil {
		err = e.st.PublishEvent(ctx, id, b)
	}
	if err != nil {
		e.log.Warn("publishing event", "execution_id", id, "type", typ, "err", err)
	}
}
