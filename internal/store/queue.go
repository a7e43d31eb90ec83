package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

const (
	// queueMaxAckPending bounds the jobs of one key that workers have
	// taken and not yet acked. Workers ack a job as soon as it starts, so
	// the bound is reached only by jobs of nodes that died holding them.
	queueMaxAckPending = 16
	// queueIdle is how long the consumer of a key nobody fetches from
	// lives on; a later fetch creates it again.
	queueIdle = 15 * time.Minute
)

// QueueToken is the subject token of key's jobs: a short hash, since key
// names may hold characters a subject cannot.
func QueueToken(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// keyQueue holds the consumers of the keys this node fetched from.
type keyQueue struct {
	mu        sync.Mutex
	consumers map[string]jetstream.Consumer // by token
}

// Enqueue appends an execution id to the work queue of key. The publish
// is acknowledged by JetStream, so once Enqueue returns the job survives a
// restart.
func (s *NATS) Enqueue(ctx context.Context, key, id string) error {
	if _, err := s.js.Publish(ctx, QueuePrefix+QueueToken(key), []byte(id)); err != nil {
		return fmt.Errorf("store: enqueueing %s: %w", id, mapErr(err))
	}
	return nil
}

// TakeJob takes the oldest available job of key without waiting; it
// returns (nil, nil) when key has none (none queued, or all taken by
// workers that have not acked them yet).
func (s *NATS) TakeJob(ctx context.Context, key string) (Job, error) {
	token := QueueToken(key)
	for attempt := 0; ; attempt++ {
		cons, err := s.keyConsumer(ctx, token)
		if err != nil {
			return nil, err
		}
		batch, err := cons.FetchNoWait(1)
		if err == nil {
			for msg := range batch.Messages() {
				return natsJob{msg}, nil
			}
			err = batch.Error()
		}
		if err == nil {
			return nil, nil
		}
		// The consumer may have gone (idle, or removed by RequeueHeld):
		// create it again once.
		s.dropConsumer(token)
		if attempt > 0 || ctx.Err() != nil {
			return nil, fmt.Errorf("store: taking a job of %q: %w", key, mapErr(err))
		}
	}
}

// DropJob removes the job id of key from the queue, if it is there: a
// job whose execution ended before it started (killed while queued) would
// otherwise wait until a worker serves key again. It reads key's queued
// jobs one by one, so its cost grows with how many key has queued.
func (s *NATS) DropJob(ctx context.Context, key, id string) error {
	subject := QueuePrefix + QueueToken(key)
	for seq := uint64(1); ; {
		msg, err := s.queue.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: looking for job %s: %w", id, mapErr(err))
		}
		if string(msg.Data) == id {
			if err := s.queue.DeleteMsg(ctx, msg.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				return fmt.Errorf("store: removing job %s: %w", id, err)
			}
			return nil
		}
		seq = msg.Sequence + 1
	}
}

// keyConsumer returns the durable consumer of one key's subject, creating
// it when this node has none cached. Consumers of several nodes for one
// key are the same durable, so a job goes to one worker of the fleet.
func (s *NATS) keyConsumer(ctx context.Context, token string) (jetstream.Consumer, error) {
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	if c, ok := s.keys.consumers[token]; ok {
		return c, nil
	}
	c, err := s.queue.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:           queueConsumerPrefix + token,
		Description:       "pyexec workers taking one key's jobs",
		FilterSubject:     QueuePrefix + token,
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           s.cfg.AckWait,
		MaxAckPending:     queueMaxAckPending,
		InactiveThreshold: queueIdle,
		Replicas:          s.cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("store: opening the queue of key %s: %w", token, mapErr(err))
	}
	s.keys.consumers[token] = c
	return c, nil
}

func (s *NATS) dropConsumer(token string) {
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	delete(s.keys.consumers, token)
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
// them, by direct gets over the stream's sequence range. Cost: one
// request per sequence number, so it is meant for start-up, when the
// queue is bounded.
func (s *NATS) QueuedIDs(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.eachQueued(ctx, func(msg *jetstream.RawStreamMsg) error {
		ids = append(ids, string(msg.Data))
		return nil
	})
	return ids, err
}

// RequeueHeld makes the jobs a worker took and has not acked available
// again at once, and returns how many there were. Without it they would
// come back only after the ack wait. It removes every key's consumer
// (the next fetch creates it again, starting at the key's oldest job), so
// it is meant for the start of a single node: in a fleet it would hand
// out again the jobs that live nodes are starting.
func (s *NATS) RequeueHeld(ctx context.Context) (int, error) {
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	n := 0
	names := s.queue.ListConsumers(ctx)
	for info := range names.Info() {
		if err := s.queue.DeleteConsumer(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return n, fmt.Errorf("store: removing queue consumer %s: %w", info.Name, err)
		}
		n += info.NumAckPending
	}
	if err := names.Err(); err != nil {
		return n, fmt.Errorf("store: listing queue consumers: %w", err)
	}
	clear(s.keys.consumers)
	return n, nil
}

// eachQueued calls fn with every message in the queue, oldest first.
func (s *NATS) eachQueued(ctx context.Context, fn func(*jetstream.RawStreamMsg) error) error {
	info, err := s.queue.Info(ctx)
	if err != nil {
		return fmt.Errorf("store: reading queue state: %w", err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		msg, err := s.queue.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // acked already: a gap in the work queue
		}
		if err != nil {
			return fmt.Errorf("store: reading queued job %d: %w", seq, err)
		}
		if err := fn(msg); err != nil {
			return err
		}
	}
	return nil
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

func (j natsJob) Nak() error {
	if err := j.msg.Nak(); err != nil {
		return fmt.Errorf("store: handing back job %s: %w", j.ID(), err)
	}
	return nil
}
