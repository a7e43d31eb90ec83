package executions

import (
	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/store"
)

// Tally counts the fleet's executions for admission from the store's
// index of their records.
type Tally struct{ Store store.Tally }

var _ admission.Counts = Tally{}

// Running counts key's running executions.
func (v Tally) Running(key string) int { return v.Store.Count(string(run.StatusRunning), key) }

// Pending counts key's pending executions.
func (v Tally) Pending(key string) int { return v.Store.Count(string(run.StatusPending), key) }

// QueuedAsync returns the callers with async jobs waiting, and how many
// jobs wait in all.
func (v Tally) QueuedAsync() ([]string, int) {
	return v.Store.AsyncOwners(string(run.StatusPending))
}

// Indexed reports whether the index holds execution id's record.
func (v Tally) Indexed(id string) bool { return v.Store.Indexed(id) }
