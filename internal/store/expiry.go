package store

import (
	"container/heap"
	"time"
)

// expiry is when an index entry was written, as the prune queue knows it.
type expiry struct {
	key     string
	updated time.Time
}

// expiries is the index's prune queue: a min-heap of write times, one
// item per key, so that pruning looks only at the entries whose time may
// have come, not at all of them. An item can be older than its entry (the
// key was written again since): pruning then queues it again at the
// entry's time instead of removing it.
type expiries []expiry

func (q expiries) Len() int           { return len(q) }
func (q expiries) Less(i, j int) bool { return q[i].updated.Before(q[j].updated) }
func (q expiries) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *expiries) Push(x any)        { *q = append(*q, x.(expiry)) }
func (q *expiries) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// due takes the items written at or before cutoff off the queue.
func (q *expiries) due(cutoff time.Time) []expiry {
	var out []expiry
	for q.Len() > 0 && !(*q)[0].updated.After(cutoff) {
		out = append(out, heap.Pop(q).(expiry))
	}
	return out
}
