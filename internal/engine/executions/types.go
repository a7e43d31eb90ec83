package executions

import (
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
)

// EventType names the kinds of live events of an execution.
type EventType string

// Event types.
const (
	EventStatus EventType = "status" // Data is the new Status; the last one is final
	EventStdout EventType = "stdout"
	EventStderr EventType = "stderr"
)

// Event is one live event; Seq starts at 1 and has no gaps, so a follower
// can resume from the last Seq it saw.
type Event struct {
	Seq  uint64    `json:"seq"`
	Type EventType `json:"type"`
	Data string    `json:"data"`
	Time time.Time `json:"time"`
}

// ListOptions filter and page GET /api/v1/executions (recent first).
// Owner, or AllOwners, must be set: a list of nobody's executions is
// refused rather than guessed.
type ListOptions struct {
	Status run.Status
	Limit  int
	Cursor string // opaque; from the previous page's next cursor
	// Owner lists only the executions of this caller (Request.Caller).
	Owner string
	// AllOwners lists every caller's executions (admin callers).
	AllOwners bool
}
