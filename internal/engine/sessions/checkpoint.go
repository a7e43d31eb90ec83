package sessions

import (
	"context"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/snapshot"
)

// Checkpoints: a node killed without warning (SIGKILL, a power cut)
// saves nothing, so with Config.CheckpointEvery a session is saved after
// a cell, in the background, when that long passed since its last
// checkpoint: a hibernation snapshot (the server's, counted as
// hibernations are) handed to Deps.OnCheckpoint, which records it for
// the fleet. The cell's answer never waits for it; the next call waits
// for a checkpoint under way (cellTurn) instead of finding the session
// busy. One is taken at a time per session, and each replaces the one
// before (deleted once the new one is recorded; a new one that could not
// be recorded is deleted instead). At most checkpointSlots run at once on
// a node; a session whose turn finds none free, or whose checkpoint
// failed, tries again CheckpointEvery later. A session's checkpoint
// is deleted when it ends, or parks at shutdown (its park is newer); one
// the fleet resumed from after its node was lost is deleted by that
// resume, as any hibernation snapshot. A session that mounts a workspace
// has none: it is not saved at shutdown either (park).

// Checkpoint is a checkpoint of session ID: snapshot Snapshot, taken
// after its cell Cells.
type Checkpoint struct {
	ID, Snapshot string
	Cells        int
}

// afterCell starts a checkpoint of s if one is due (CheckpointEvery since
// its last one, or since its creation), and tells
// Deps.OnCell the count of cells of a session that has a checkpoint. The
// caller holds s.run (it is let go before the checkpoint claims s).
func (m *Service) afterCell(s *Live, n int) {
	s.mu.Lock()
	has := s.checkpoint != "" || s.checkpointing != nil
	since := s.checkpointAt
	if since.IsZero() {
		since = s.created // a session younger than CheckpointEvery has none
	}
	due := m.cfg.CheckpointEvery > 0 && m.deps.Vault != nil && m.deps.OnCheckpoint != nil && s.req.Workspace == "" &&
		s.checkpointing == nil && !s.gone && s.k != nil && run.Now().Sub(since) >= m.cfg.CheckpointEvery
	var done chan struct{}
	if due {
		done = make(chan struct{})
		s.checkpointing = done
	}
	s.mu.Unlock()
	if has && m.deps.OnCell != nil {
		m.deps.OnCell(s.id, n)
	}
	slot := false
	if due {
		select {
		case m.ckptSlots <- struct{}{}:
			slot = true
		default:
		}
	}
	if !due || !slot || !m.addCheckpointer() {
		if due {
			s.mu.Lock()
			s.checkpointing = nil
			s.checkpointAt = run.Now() // no room now: CheckpointEvery later
			s.mu.Unlock()
			close(done)
		}
		if slot {
			<-m.ckptSlots
		}
		return
	}
	go func() {
		defer m.wg.Done()
		defer m.hibWG.Done()
		defer func() { <-m.ckptSlots }()
		defer func() {
			s.mu.Lock()
			s.checkpointing = nil
			s.mu.Unlock()
			close(done)
		}()
		m.checkpoint(s)
	}()
}

// addCheckpointer counts one more checkpoint under way, unless the
// service shuts down: the shutdown waits for those under way (they are
// interrupted) before it parks the sessions, as for hibernations.
func (m *Service) addCheckpointer() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1)
	m.hibWG.Add(1)
	return true
}

// checkpoint saves s, between cells, and records the save. A session a
// call or a hibernation took first is not saved: the next cell tries
// again. The session is not shown busy meanwhile, nor is the save
// activity: a call that needs the kernel waits for it (cellTurn), and the
// reaper may end the session (the save then fails).
func (m *Service) checkpoint(s *Live) {
	if !s.files.TryLock() {
		return
	}
	defer s.files.Unlock()
	if !s.run.TryLock() {
		return
	}
	s.mu.Lock()
	k := s.k
	ready := k != nil && !s.gone && s.asleep == ""
	s.mu.Unlock()
	if !ready {
		s.run.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(m.stopping, m.cfg.SaveTimeout)
	saved, err := m.save(ctx, s, k, snapshot.KindHibernation)
	cancel()
	s.mu.Lock()
	gone := s.gone
	// A failed one is tried again CheckpointEvery later, not at the next
	// cell: a save that fails (a quota, a slow __reduce__) costs once per
	// interval at most.
	s.checkpointAt = run.Now()
	s.mu.Unlock()
	switch {
	case err != nil:
		s.run.Unlock()
		m.log.Warn("a session's checkpoint failed; it is tried again later", "session_id", s.id, "err", err,
			"after", m.cfg.CheckpointEvery)
		return
	case gone:
		s.run.Unlock()
		m.forgetSnapshot(saved.ID) // ended, parked or fenced meanwhile: nobody resumes from it
		return
	}
	// Recorded before s.run is let go: a restart (which unrecords the
	// checkpoint) never comes between the save and its record.
	err = m.deps.OnCheckpoint(Checkpoint{ID: s.id, Snapshot: saved.ID, Cells: saved.ExecutionCount})
	s.mu.Lock()
	old := saved.ID // not recorded: the record still names the one before, if any, which is kept
	switch {
	case err != nil:
	case s.gone:
		// ended or fenced since it was recorded: the record may name it
		// (a fenced session resumes from it); the sweep deletes it if not
		old = ""
	default:
		old, s.checkpoint = s.checkpoint, saved.ID
	}
	s.mu.Unlock()
	s.run.Unlock()
	if err != nil {
		m.log.Warn("a session's checkpoint could not be recorded; the one before is kept", "session_id", s.id, "err", err)
	}
	if old != "" {
		m.forgetSnapshot(old)
	}
}

// checkpointSlots bounds the checkpoints under way on a node at once.
const checkpointSlots = 2

// cellTurn takes s.run for a cell: at once, or once the checkpoint under
// way ends (as long as ctx lets it wait). False: a cell or another call
// has it.
func (m *Service) cellTurn(ctx context.Context, s *Live) bool {
	for {
		if s.run.TryLock() {
			return true
		}
		s.mu.Lock()
		done := s.checkpointing
		s.mu.Unlock()
		if done == nil {
			return false
		}
		select {
		case <-done:
		case <-ctx.Done():
			return false
		case <-time.After(checkpointPoll):
			// the checkpoint may not have claimed s yet
		}
	}
}

// checkpointPoll bounds the wait of a cell for the run lock while a
// checkpoint starts.
const checkpointPoll = 10 * time.Millisecond

// dropCheckpoint forgets s's checkpoint (a restart made it stale), tells
// Deps.OnCheckpoint that s has none (a Checkpoint without Snapshot, its
// count of cells 0), and deletes it once that is recorded (else the record
// still names it: it is kept, and the sweep deletes it once none does).
// The next checkpoint is due CheckpointEvery later.
func (m *Service) dropCheckpoint(s *Live) {
	s.mu.Lock()
	ckpt := s.checkpoint
	s.checkpoint, s.checkpointAt = "", run.Now()
	s.mu.Unlock()
	if ckpt == "" {
		return
	}
	if m.deps.OnCheckpoint != nil {
		if err := m.deps.OnCheckpoint(Checkpoint{ID: s.id}); err != nil {
			m.log.Warn("a session's stale checkpoint could not be unrecorded; it is kept", "session_id", s.id, "err", err)
			return
		}
	}
	m.forgetSnapshot(ckpt)
}
