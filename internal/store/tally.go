package store

import (
	"slices"
)

// Tally answers questions about the whole fleet's records from this
// node's copy of the index, without a request. The copy follows the
// bucket's watch, so other nodes' writes show up after the watch's delay
// (milliseconds); this node's own writes count at once.
type Tally interface {
	// Count returns how many records of owner have status.
	Count(status, owner string) int
	// AsyncOwners returns the owners with async records of status, in
	// name order, and how many such records there are in all.
	AsyncOwners(status string) (owners []string, total int)
	// IndexChanged returns a channel that is closed at the next change of
	// any index entry.
	IndexChanged() <-chan struct{}
	// Indexed reports whether the index holds an entry for key.
	Indexed(key string) bool
}

var _ Tally = (*NATS)(nil)

// Count implements Tally.
func (s *NATS) Count(status, owner string) int {
	ix := s.index
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n := 0
	for _, final := range []bool{false, true} {
		for _, async := range []bool{false, true} {
			n += ix.tally[Meta{Status: status, Owner: owner, Final: final, Async: async}]
		}
	}
	return n
}

// AsyncOwners implements Tally.
func (s *NATS) AsyncOwners(status string) ([]string, int) {
	ix := s.index
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	byOwner := ix.async[status]
	owners := make([]string, 0, len(byOwner))
	total := 0
	for owner, c := range byOwner {
		owners = append(owners, owner)
		total += c
	}
	slices.Sort(owners)
	return owners, total
}

// Indexed implements Tally.
func (s *NATS) Indexed(key string) bool {
	ix := s.index
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	_, ok := ix.entries[key]
	return ok
}

// IndexChanged implements Tally.
func (s *NATS) IndexChanged() <-chan struct{} {
	ix := s.index
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.changed
}

// owner is the owner in the index entry of key, "" when it has none.
func (ix *index) owner(key string) string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.entries[key].Owner
}
