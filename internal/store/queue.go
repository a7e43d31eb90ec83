package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Enqueue appends an execution id to the work queue. The publish is
// acknowledged by JetStream, so once Enqueue returns the job survives a
// restart.
func (s *NATS) Enqueue(ctx context.Context, id string) error {
	if _, err := s.js.Publish(ctx, QueueSubject, []byte(id)); err != nil {
		return fmt.Errorf("store: enqueueing %s: %w", id, mapErr(err))
	}
	return nil
}

// NextJob takes the next job from the shared durable consumer, waiting up
// to maxWait. It returns (nil, nil) when no job arrived in time.
func (s *NATS) NextJob(ctx context.Context, maxWait time.Duration) (Job, error) {
	wctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	msg, err := s.workers.Next(jetstream.FetchContext(wctx))
	switch {
	case err == nil:
		return natsJob{msg}, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("store: waiting for a job: %w", ctx.Err())
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return nil, nil
	}
	return nil, fmt.Errorf("store: waiting for a job: %w", err)
}

// QueueDepth counts the jobs in the queue, including those fetched by a
// worker but not acked yet.
func (s *NATS) QueueDepth(ctx context.Context) (uint64, error) {
	info, err := s.queue.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: reading queue state: %w", err)
	}
	return info.State.Msgs, nil
}

// QueuedIDs reads the ids of the jobs still in the queue without taking
// them, by direct gets over the stream's sequence range (a work-queue
// stream admits no second consumer). Cost: one request per sequence
// number, so it is meant for start-up, when the queue is bounded.
func (s *NATS) QueuedIDs(ctx context.Context) ([]string, error) {
	return s.queuedUpTo(ctx, func(st jetstream.StreamState) (uint64, error) { return st.LastSeq, nil })
}

// RequeueHeld puts the jobs a worker took and has not acked back at the
// end of the queue, at once, and returns how many. Without it they would
// come back only after the ack wait. Meant for start-up: on a single node
// they are the jobs a previous run of it held. A worker still holding
// one (another node) fails to ack it later, and the copy finds the
// execution started: only one worker moves a record from pending to
// running.
func (s *NATS) RequeueHeld(ctx context.Context) (int, error) {
	cons, err := s.workers.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: reading queue state: %w", err)
	}
	info, err := s.queue.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: reading queue state: %w", err)
	}
	n := 0
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= cons.Delivered.Stream; seq++ {
		msg, err := s.queue.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("store: reading queued job %d: %w", seq, err)
		}
		if err := s.Enqueue(ctx, string(msg.Data)); err != nil {
			return n, err
		}
		if err := s.queue.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !msgGone(err) {
			return n, fmt.Errorf("store: removing held job %d: %w", seq, err)
		}
		n++
	}
	return n, nil
}

// queuedUpTo lists the ids of the queued jobs up to the stream sequence
// number last returns.
func (s *NATS) queuedUpTo(ctx context.Context, last func(jetstream.StreamState) (uint64, error)) ([]string, error) {
	info, err := s.queue.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: reading queue state: %w", err)
	}
	var ids []string
	if info.State.Msgs == 0 {
		return ids, nil
	}
	end, err := last(info.State)
	if err != nil {
		return nil, fmt.Errorf("store: reading queue state: %w", err)
	}
	for seq := info.State.FirstSeq; seq <= end; seq++ {
		msg, err := s.queue.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // acked already: a gap in the work queue
		}
		if err != nil {
			return nil, fmt.Errorf("store: reading queued job %d: %w", seq, err)
		}
		ids = append(ids, string(msg.Data))
	}
	return ids, nil
}

// natsJob is a fetched queue message.
type natsJob struct{ msg jetstream.Msg }

func (j natsJob) ID() string { return string(j.msg.Data()) }

func (j natsJob) Ack(ctx context.Context) error {
	if err := j.msg.DoubleAck(ctx); err != nil {
		return fmt.Errorf("store: acking job %s: %w", j.ID(), err)
	}
	return nil
}

func (j natsJob) InProgress() error {
	if err := j.msg.InProgress(); err != nil {
		return fmt.Errorf("store: extending job %s: %w", j.ID(), err)
	}
	return nil
}

// msgGone reports whether a delete failed because the message is no
// longer there: on a cluster another node may ack (and so remove) a job
// between the read and the delete. The client flattens the server's
// answer (JSStreamMsgDeleteFailedF, "no message found") into the text of
// ErrMsgDeleteUnsuccessful, and other delete failures share that
// sentinel, hence the text.
func msgGone(err error) bool {
	return errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) && strings.Contains(err.Error(), "no message found")
}
