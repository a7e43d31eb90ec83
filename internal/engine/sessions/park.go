package sessions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/snapshot"
)

// A session outlives a graceful stop of its server: when the service
// shuts down, each session that is idle is hibernated (or already is) and
// parked rather than ended: taken out of this run's registry with its
// hibernation snapshot kept, and handed to Deps.OnPark, which records it
// (the fleet's registry). The next run of the node adopts it (Adopt):
// registered, hibernated, under the same id, owner, lifetime and count,
// and resumed on its first call as any hibernated session is, its
// environment leased then. A session busy at shutdown (a cell running),
// or that cannot be saved, ends as before.

// Parked is a session a shutdown saved for the next run of its node.
type Parked struct {
	ID, Caller string
	Snapshot   string // its hibernation snapshot
	// Restored, when set, says that Snapshot is the session's last
	// checkpoint, taken before its node was lost: the cell that resumes
	// it reports it (CellResult.RestoredFrom).
	Restored *RestoredFrom
}

// shutdown parks every session it can and ends the rest (the reaper,
// once its context ended). The sessions already hibernated are parked
// first: they cost a registry entry. The hibernation workers' saves were
// interrupted with m.stopping (Close) and end within InterruptGrace; then
// the awake sessions are saved parkers at once, each key's in turn
// (fairOrder), all within Config.ParkTimeout, so that no session's save,
// stalled by its own code, takes the time of the others: each save has
// its share of ParkTimeout (saveShare), so that stalling saves give their
// turns back before the others' time is over.
func (m *Service) shutdown() {
	m.mu.Lock()
	m.closed = true
	all := make([]*Live, 0, len(m.live))
	for _, s := range m.live {
		all = append(all, s)
	}
	m.mu.Unlock()
	awake := all[:0:0]
	for _, s := range all {
		if !m.parkAsleep(s) {
			awake = append(awake, s)
		}
	}
	m.hibWG.Wait()
	awake = fairOrder(awake)
	ctx, cancel := context.WithTimeout(m.base, m.cfg.ParkTimeout)
	defer cancel()
	// the rounds of parkers saves the awake sessions take, and one more
	// for the interrupts of those that stall
	rounds := (len(awake)+parkers-1)/parkers + 1
	share := m.cfg.ParkTimeout / time.Duration(rounds)
	turns := make(chan struct{}, parkers)
	var wg sync.WaitGroup
	for _, s := range awake {
		turns <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-turns }()
			sctx, cancel := context.WithTimeout(ctx, saveShare(share, s.Info().MemoryBytes))
			defer cancel()
			if !m.park(sctx, s) {
				m.endSession(s, "server shutting down")
			}
		}()
	}
	wg.Wait()
}

// saveShare is how long one session's save at shutdown may take: its
// share of the time (ParkTimeout over the rounds of saves), or,
// when that is shorter, what saving memBytes takes with room to spare
// (saveTimeBase and a second per saveBytesPerSecond; a save runs at about
// 400 MB/s here).
func saveShare(share time.Duration, memBytes int64) time.Duration {
	return max(share, saveTimeBase+time.Duration(memBytes/saveBytesPerSecond)*time.Second)
}

const (
	saveTimeBase       = 500 * time.Millisecond
	saveBytesPerSecond = 128 << 20
)

// parkers is how many sessions a shutdown saves at once.
const parkers = 4

// fairOrder orders the sessions a shutdown saves: each key's first, then
// each key's second, and so on, those whose hibernation failed this run
// last; so that no key's sessions, stalling their saves, take every turn
// before another key's are saved.
func fairOrder(list []*Live) []*Live {
	rank := make(map[*Live]int, len(list))
	nth := map[string]int{}
	for _, s := range list {
		s.mu.Lock()
		failed := s.hibFails > 0
		s.mu.Unlock()
		rank[s] = nth[s.caller]
		if failed {
			rank[s] += len(list)
		}
		nth[s.caller]++
	}
	slices.SortStableFunc(list, func(a, b *Live) int { return cmp.Compare(rank[a], rank[b]) })
	return list
}

// parkAsleep parks s if it is hibernated and no call is resuming it.
func (m *Service) parkAsleep(s *Live) bool {
	s.mu.Lock()
	ready := s.asleep != "" && !s.busy
	s.mu.Unlock()
	return ready && m.park(m.base, s)
}

// park saves s for the next run, if it can, within ctx.
func (m *Service) park(ctx context.Context, s *Live) bool {
	if m.deps.Vault == nil || m.deps.OnPark == nil {
		return false
	}
	if s.req.Workspace != "" {
		// Its workspace is committed when it ends (endWorkspace); a
		// parked session would be adopted without its mount.
		m.log.Info("a session with a workspace ends at shutdown; its workspace is committed", "session_id", s.id)
		return false
	}
	s.mu.Lock()
	asleep := s.asleep != ""
	s.mu.Unlock()
	if !asleep {
		if err := ctx.Err(); err != nil {
			m.log.Warn("the shutdown's time to save sessions is over; a session ends unsaved", "session_id", s.id)
			return false
		}
		if err := m.hibernate(ctx, s); err != nil {
			m.log.Warn("a session could not be saved at shutdown; it ends", "session_id", s.id, "err", err)
			return false
		}
	}
	p, ok := m.forgetAsleep(s, s.Info())
	if !ok {
		return false
	}
	s.mu.Lock()
	ckpt := s.checkpoint // the park is newer: deleted once the park is recorded
	s.checkpoint = ""
	s.mu.Unlock()
	s.release()
	if err := m.deps.OnPark(p); err != nil {
		// The record still names the checkpoint (if any): the session
		// resumes from it; the park's snapshot is left to the sweep.
		m.log.Warn("a session saved at shutdown could not be recorded", "session_id", s.id, "err", err)
		return true
	}
	if ckpt != "" {
		m.forgetSnapshot(ckpt)
	}
	m.log.Info("session saved for the next start", "session_id", s.id, "snapshot_id", p.Snapshot)
	return true
}

// forgetAsleep takes s out of the registry if it is hibernated, at once
// with reading its snapshot: a resume that ends later sees s gone and
// leaves the snapshot to the parked entry. The parked keep info, as
// listings show it.
func (m *Service) forgetAsleep(s *Live, info Session) (Parked, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.live[s.id] != s || s.asleep == "" {
		return Parked{}, false
	}
	delete(m.live, s.id)
	s.gone = true
	info.State, info.MemoryBytes = Hibernated, 0
	m.parked[s.id] = info
	return Parked{ID: s.id, Caller: s.caller, Snapshot: s.asleep}, true
}

// Adopt registers, hibernated, session p that an earlier run of this node
// parked: its snapshot, verified for its owner, gives its configuration
// and execution count; created and expires are its own. Its next call
// resumes it, and leases its environment first (readyEnv): adopting waits
// for no environment, so that a node takes its sessions back at once
// however long their environments take to build. It counts against the
// caps as any session. A snapshot that
// cannot be read now (the store, the node's room to read it) leaves the
// session parked, its snapshot kept, and the error wraps
// run.ErrUnavailable: the caller tries again later. A session that cannot
// be adopted for good ends and its snapshot is deleted, unless the
// snapshot did not verify as its own (it may be another's).
func (m *Service) Adopt(ctx context.Context, p Parked, created, expires time.Time) (Session, error) {
	if m.deps.Vault == nil {
		return Session{}, ErrNoSnapshots
	}
	unhold, err := m.hold()
	if err != nil {
		return Session{}, err
	}
	defer unhold()
	snap, err := m.deps.Vault.Open(ctx, p.Snapshot, p.Caller)
	switch {
	case err == nil:
	case !lost(err):
		return Session{}, fmt.Errorf("%w: session %s: its snapshot cannot be read now: %w", run.ErrUnavailable, p.ID, err)
	case errors.Is(err, snapshot.ErrIntegrity) || errors.Is(err, ErrSnapshotGone):
		return Session{}, err
	default:
		m.forgetSnapshot(p.Snapshot) // too large now, or unreadable: its entry ends, and with it the snapshot
		return Session{}, err
	}
	h := snap.Header
	snap.Close()
	if h.Kind != snapshot.KindHibernation || h.SessionID != p.ID {
		return Session{}, fmt.Errorf("%w: snapshot %s is not the hibernation of session %s", snapshot.ErrIntegrity, p.Snapshot, p.ID)
	}
	s, err := m.adopted(p, h, created, expires)
	if err != nil {
		m.forgetSnapshot(p.Snapshot)
		return Session{}, err
	}
	m.log.Info("session adopted from an earlier run", "session_id", s.id, "snapshot_id", p.Snapshot, "caller", s.caller)
	return s.Info(), nil
}

// adopted registers p, hibernated, with the configuration of its
// snapshot's header h, created and expiring when it did (zero: now and
// after its lifetime), its environment not leased yet.
func (m *Service) adopted(p Parked, h snapshot.Header, created, expires time.Time) (*Live, error) {
	// Its own hibernation: the session comes back with the network it
	// had, checked again (a secret its key may no longer use refuses it).
	req := withSnapshotConfig(Request{Caller: p.Caller}, h.Session)
	req.Network, req.NetworkAllow, req.Secrets = h.Session.Network, h.Session.NetworkAllow, h.Session.Secrets
	s, err := m.unprepared(req)
	if err != nil {
		return nil, err
	}
	s.id = p.ID
	if s.use != nil {
		s.use = restored(h.Session.NetworkUsed) // the quotas are the session's, over its whole life
	}
	s.created, s.expires = cmp.Or(created, s.created), cmp.Or(expires, s.expires)
	s.count, s.asleep, s.last = h.ExecutionCount, p.Snapshot, run.Now()
	s.restored = p.Restored
	if err := m.reserve(s); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}
