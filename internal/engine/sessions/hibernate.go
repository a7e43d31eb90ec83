package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/snapshot"
)

// Hibernation: a session idle for Config.HibernateAfter is saved as a
// snapshot (snapshot.KindHibernation) and its kernel ended; it stays in
// the registry, under its caps and its idle timeout and lifetime, holding
// no memory. Its next call resumes it: a new kernel made as for any
// session, the snapshot loaded into it, the snapshot deleted.
//
// The reaper only picks the sessions to hibernate: each is saved by a
// worker of its own, at most Config.Hibernations at once, so that no save
// delays the end of another session. A session that could not be saved
// stays awake and is not tried again before a delay that doubles with
// each failure (hibernateBackoff). One whose interpreter ends while it is
// saved ends, and is not counted as a failure.

// Bounds of the delay before a session whose hibernation failed is tried
// again.
const (
	hibernateRetryMin = 30 * time.Second
	hibernateRetryMax = 30 * time.Minute
)

// hibernateBackoff is the delay after the n-th failure in a row.
func hibernateBackoff(n int) time.Duration {
	d := hibernateRetryMin << min(n-1, 10)
	return min(d, hibernateRetryMax)
}

// startHibernations hands the sessions idle at t to hibernation workers
// while one is free; the rest wait for a later tick.
func (m *Service) startHibernations(t time.Time) {
	for _, s := range m.sleepy(t) {
		select {
		case m.hibSlots <- struct{}{}:
		default:
			return
		}
		s.mu.Lock()
		s.hibernating = true
		s.mu.Unlock()
		m.wg.Add(1)
		m.hibWG.Add(1)
		go func() {
			defer m.wg.Done()
			defer m.hibWG.Done()
			defer func() { <-m.hibSlots }()
			err := m.hibernate(m.stopping, s) // Close gives up on it
			s.mu.Lock()
			defer s.mu.Unlock()
			s.hibernating = false
			switch {
			case err == nil:
				s.hibFails = 0
			case errors.Is(err, ErrBusy) || errors.Is(err, ErrEnded):
				// a call came first, or it ended: not a failure
			case errors.Is(err, errKernelEnded):
				// Its interpreter ended as it was saved (out of memory, its
				// own code exiting from a pickling hook, killed past the save
				// timeout): the save did not fail, the session has nothing
				// left to save, and the reaper ends it.
				m.counts.hibernateEnded.Add(1)
				m.log.Info("a session's interpreter ended while it hibernated; it ends", "session_id", s.id, "err", err)
			default:
				s.hibFails++
				s.hibRetry = time.Now().Add(hibernateBackoff(s.hibFails))
				m.counts.hibernateFailed.Add(1)
				m.log.Warn("a session could not hibernate; it stays awake", "session_id", s.id, "failures", s.hibFails,
					"retry_in", hibernateBackoff(s.hibFails), "err", err)
			}
		}()
	}
}

// hibernate saves s, idle, and ends its kernel, within ctx. A session
// that cannot be saved stays as it was, but for the connections it held,
// which were cut (reopenNetwork). File calls wait until it is done
// (s.files).
func (m *Service) hibernate(ctx context.Context, s *Live) error {
	if !s.files.TryLock() {
		return fmt.Errorf("%w: %s", ErrBusy, s.id)
	}
	defer s.files.Unlock()
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	k, done, err := m.claim(ctx, s)
	if err != nil {
		return err // a cell started meanwhile, or it ended
	}
	defer func() {
		done()
		s.mu.Lock()
		s.last = last // hibernating is not activity: the idle timeout still counts
		s.mu.Unlock()
	}()
	// Its network ends before the header is written (in save), so that
	// the header carries every event of it: a connection the session
	// holds is cut now, its event in s.use once Close returns, rather
	// than after the save, when the interpreter is killed (a session
	// adopted elsewhere would never see it). This is the wait for the
	// egress's Close that k.stop, below, had: moved, not added. Not after
	// a failed attempt: a failure the user's state causes (too large,
	// the key's quota) comes back at every retry, and would cut the
	// session's connections each time; a retry's header has the events up
	// to its save, as a snapshot's does.
	s.mu.Lock()
	retry := s.hibFails > 0
	s.mu.Unlock()
	cut := !retry && k.hasEgress()
	if cut {
		k.closeEgress()
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.SaveTimeout)
	defer cancel()
	saved, err := m.save(ctx, s, k, snapshot.KindHibernation)
	if err != nil {
		if cut && !errors.Is(err, errKernelEnded) {
			return errors.Join(err, m.reopenNetwork(s, k))
		}
		return err
	}
	s.mu.Lock()
	if s.gone { // ended while it was saved: nothing will resume it
		s.mu.Unlock()
		m.forgetSnapshot(saved.ID)
		return fmt.Errorf("%w: %s", ErrEnded, s.id)
	}
	s.k, s.asleep = nil, saved.ID
	s.mu.Unlock()
	k.stop()
	m.counts.hibernated.Add(1)
	m.log.Info("session hibernated", "session_id", s.id, "snapshot_id", saved.ID, "bytes", saved.Bytes)
	return nil
}

// reopenNetwork gives s, whose hibernation failed once its egress was
// closed, a new egress on its kernel k: it stays awake with its network,
// as a user expects of a session that did not hibernate, only the
// connections it held cut. Its network is checked again first, as
// recheckNetwork does at each tick: one the planner refuses now stays
// without a route out. A session whose egress cannot be made again ends
// (ErrEnded) rather than run on without the network it was given.
func (m *Service) reopenNetwork(s *Live, k *kernel) error {
	s.mu.Lock()
	gone := s.gone
	s.mu.Unlock()
	if gone || m.stopping.Err() != nil {
		return nil // it ends, or the server stops: no one will use it
	}
	req := s.req
	req.Caller = s.caller
	if _, err := m.planNetwork(req); err != nil {
		m.log.Warn("a session's network is refused now: its egress stays closed after its failed hibernation",
			"session_id", s.id, "err", err)
		return nil
	}
	net := s.kernelNet()
	if net == nil {
		return nil
	}
	if err := k.attach(m, k.jail, net); err != nil {
		m.log.Warn("a session's network could not be reopened after its failed hibernation; it ends", "session_id", s.id,
			"err", err)
		m.endSession(s, "its network could not be reopened after a failed hibernation")
		return fmt.Errorf("%w: %s: reopening its network: %w", ErrEnded, s.id, err)
	}
	return nil
}

// wake resumes s if it hibernated, with s.run held: it reports whether it
// did. A session adopted from an earlier run leases its environment first
// (readyEnv), as long as ctx lets it; the resume itself runs under the
// service's context, not the caller's: a caller that goes away does not
// cut it short. A session whose environment cannot be prepared stays
// hibernated (envUnready). A session whose snapshot
// can never load (missing, not verifying, refused by the interpreter, or
// ending the interpreter maxLoadFailures times) is ended (ErrEnded), its
// snapshot deleted; one that fails for a reason that may pass (the store,
// the node's room, a kernel that would not start) stays hibernated with
// its snapshot, and the call fails with run.ErrUnavailable. A session
// parked or ended while it resumed keeps what the shutdown recorded; one
// parked answers run.ErrUnavailable (it comes back at the next start).
func (m *Service) wake(ctx context.Context, s *Live) (bool, error) {
	s.mu.Lock()
	id, gone := s.asleep, s.gone
	s.mu.Unlock()
	if id == "" || gone {
		return false, nil
	}
	err := m.readyEnv(ctx, s)
	switch {
	case err == nil:
		rctx, cancel := context.WithTimeout(m.base, m.cfg.SaveTimeout)
		defer cancel()
		err = m.resume(rctx, s, id)
	case !errors.Is(err, errParkedMeanwhile):
		return false, m.envUnready(ctx, s, id, err)
	}
	if err != nil {
		if errors.Is(err, errParkedMeanwhile) {
			if _, parked := m.Parked(s.id); parked {
				return false, fmt.Errorf("%w: session %s was saved for this node's next start while it resumed; retry later", run.ErrUnavailable, s.id)
			}
			return false, err
		}
		m.counts.resumeFailed.Add(1)
		if errors.Is(err, errKernelEnded) {
			s.mu.Lock()
			s.loadFails++
			if s.loadFails >= maxLoadFailures {
				err = fmt.Errorf("%w: it ended the interpreter in %d loads in a row: %w", errUnloadable, s.loadFails, err)
			}
			s.mu.Unlock()
		}
		if errors.Is(err, errNetworkRefused) {
			// Its network is refused now (a secret its key may no longer
			// use, network turned off): it stays hibernated, without a
			// kernel, until its idle timeout ends it.
			m.log.Info("a hibernated session's network is refused; it stays hibernated", "session_id", s.id, "err", err)
			detail := strings.TrimPrefix(err.Error(), errNetworkRefused.Error()+": ")
			return false, fmt.Errorf("%w: session %s stays hibernated: %s", run.ErrInvalid, s.id,
				strings.TrimPrefix(detail, run.ErrInvalid.Error()+": "))
		}
		if !lost(err) {
			m.log.Warn("a hibernated session could not resume now; it stays hibernated", "session_id", s.id, "snapshot_id", id, "err", err)
			return false, fmt.Errorf("%w: session %s could not resume from its hibernation now, retry later: %v", run.ErrUnavailable, s.id, err)
		}
		m.log.Warn("a hibernated session cannot resume; it ends", "session_id", s.id, "snapshot_id", id, "err", err)
		m.endSession(s, "resume failed")
		return false, fmt.Errorf("%w: %s could not resume from its hibernation: %v", ErrEnded, s.id, err)
	}
	m.forgetSnapshot(id)
	m.counts.resumed.Add(1)
	m.log.Info("session resumed", "session_id", s.id, "snapshot_id", id)
	return true, nil
}

// envUnready answers a call on s (hibernated in snapshot id) whose
// environment readyEnv could not prepare; s stays hibernated. Requirements
// that do not install, or that the resolver refuses, answer as at the
// session's create (run.ErrInvalid, install_error): whether the cause
// passes (the index unreachable) or not (a distribution gone) cannot be
// told apart, and the failed call did not count as activity, so the idle
// timeout ends a session whose environment never builds again. A caller
// that went away, or the service stopping, answers run.ErrUnavailable
// without counting as a resume failure; any other cause answers
// run.ErrUnavailable with a generic text (the cause, which may name the
// server's paths, is logged).
func (m *Service) envUnready(ctx context.Context, s *Live, id string, err error) error {
	switch {
	case errors.Is(err, run.ErrInvalid):
		m.log.Info("a hibernated session's environment cannot be built; it stays hibernated", "session_id", s.id, "snapshot_id", id, "err", err)
		detail := strings.TrimPrefix(err.Error(), "preparing the session's environment: ")
		detail = strings.TrimPrefix(detail, run.ErrInvalid.Error()+": ")
		detail = strings.TrimPrefix(detail, run.ReasonInstallError+": ")
		return fmt.Errorf("%w: %s: session %s stays hibernated, its environment could not be built: %s", run.ErrInvalid, run.ReasonInstallError, s.id, detail)
	case ctx.Err() != nil || m.stopping.Err() != nil:
		return fmt.Errorf("%w: session %s is still waiting for its environment; retry later", run.ErrUnavailable, s.id)
	}
	m.counts.resumeFailed.Add(1)
	m.log.Warn("a hibernated session's environment cannot be prepared now; it stays hibernated", "session_id", s.id, "snapshot_id", id, "err", err)
	return fmt.Errorf("%w: session %s could not resume from its hibernation now, its environment cannot be prepared; retry later", run.ErrUnavailable, s.id)
}

// readyEnv leases the environment of s if it has none yet (a session
// adopted from an earlier run), building it if it must: the call that
// resumes s waits for it as the create of a session does, as long as ctx
// lets it, and no longer than the service runs (Close parks s meanwhile).
// While it waits s is preparing: never idle, though its lifetime still
// counts. Once the environment is leased s is idle from then; a failure
// leaves s hibernated, its idle timeout counting from before the call, for
// the next call to try again.
func (m *Service) readyEnv(ctx context.Context, s *Live) (err error) {
	s.mu.Lock()
	pending, last := s.envPending, s.last
	s.preparing = pending
	s.mu.Unlock()
	if !pending {
		return nil
	}
	defer func() {
		s.mu.Lock()
		s.preparing = false
		if err == nil {
			s.last = run.Now()
		} else {
			s.last = last // a failed attempt is not activity
		}
		s.mu.Unlock()
	}()
	unhold, err := m.hold()
	if err != nil {
		return err
	}
	defer unhold()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(m.stopping, cancel)()
	if err := m.prepareEnv(ctx, s, nil); err != nil {
		return fmt.Errorf("preparing the session's environment: %w", err)
	}
	return nil
}

// maxLoadFailures is how many loads in a row of a session's hibernation
// may end its interpreter (out of memory, killed past its load timeout)
// before the snapshot counts as one that never loads.
const maxLoadFailures = 3

// errKernelEnded: the interpreter ended, or was killed, before it
// finished saving or loading a state.
var errKernelEnded = errors.New("the session's interpreter ended while its state was moved")

// loadTimeout bounds loading size bytes of state: loadTimeBase, and a
// second per loadBytesPerSecond, at most Config.SaveTimeout.
func (m *Service) loadTimeout(size int64) time.Duration {
	d := loadTimeBase + time.Duration(size/loadBytesPerSecond)*time.Second
	return min(d, m.cfg.SaveTimeout)
}

const (
	loadTimeBase       = 10 * time.Second
	loadBytesPerSecond = 16 << 20
)

// errUnloadable marks a snapshot the session's interpreter refused: it
// will refuse it again.
var errUnloadable = errors.New("the snapshot does not load")

// lost says that a resume failed for good: the snapshot is gone, does not
// verify, or does not load.
func lost(err error) bool {
	return errors.Is(err, errUnloadable) || errors.Is(err, snapshot.ErrIntegrity) || errors.Is(err, snapshot.ErrWorkspace) ||
		errors.Is(err, snapshot.ErrTooLarge) || errors.Is(err, ErrSnapshotGone) || errors.Is(err, ErrEnded)
}

// ErrSnapshotGone is what a Vault's Open returns, wrapped, for a snapshot
// the store does not hold.
var ErrSnapshotGone = errors.New("the snapshot is not in the store")

// resume loads hibernation snapshot id into a new kernel of s.
func (m *Service) resume(ctx context.Context, s *Live, id string) error {
	unhold, err := m.hold()
	if err != nil {
		return err
	}
	defer unhold()
	snap, err := m.deps.Vault.Open(ctx, id, s.caller)
	if err != nil {
		return err
	}
	defer snap.Close()
	if h := snap.Header; h.ID != id || h.Kind != snapshot.KindHibernation || h.SessionID != s.id {
		return fmt.Errorf("%w: snapshot %s is not this session's hibernation", snapshot.ErrIntegrity, id)
	}
	// The policy kept with the session is checked again (the key's right
	// to each secret as the catalog says now), with new placeholders.
	s.mu.Lock()
	spec := s.spec
	s.mu.Unlock()
	spec, np, err := m.replanNetwork(s, spec)
	if err != nil {
		return fmt.Errorf("%w: %w", errNetworkRefused, err)
	}
	s.mu.Lock()
	s.spec, s.net = spec, np
	s.mu.Unlock()
	k, err := m.startKernel(m.base, spec, s.startForks, s.kernelNet())
	if err != nil {
		return err
	}
	m.watchKernel(k)
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		k.proc.Kill()
		return fmt.Errorf("%w: %s", errParkedMeanwhile, s.id)
	}
	s.k, s.busy = k, true
	s.mu.Unlock()
	_, err = m.restoreInto(s, snap)
	s.mu.Lock()
	s.busy = false
	switch {
	case s.gone:
		// Parked (or ended) meanwhile: the snapshot is the parked
		// entry's (or already deleted), and this kernel is nobody's.
		s.k = nil
		err = fmt.Errorf("%w: %s was parked or ended while it resumed", errParkedMeanwhile, s.id)
	case err == nil:
		s.asleep, s.loadFails = "", 0
	default:
		s.k = nil // still hibernated, or about to end: not this half-loaded kernel
	}
	s.mu.Unlock()
	if err != nil {
		k.stop()
	}
	return err
}

// errParkedMeanwhile: the session left the registry while it resumed;
// its snapshot is no longer the resume's to delete.
var errParkedMeanwhile = fmt.Errorf("%w: it left while it resumed", ErrEnded)

// awake returns s's kernel, resuming s first if it hibernated, for a
// file call (which does not hold s.run otherwise), waiting for its
// environment as long as ctx lets it: the call counts as activity once it
// has the kernel. The caller holds s.files for reading while it uses the
// kernel, so that no hibernation ends it meanwhile.
func (m *Service) awake(ctx context.Context, s *Live) (*kernel, error) {
	s.mu.Lock()
	asleep := s.asleep != ""
	s.mu.Unlock()
	if asleep {
		s.run.Lock()
		_, err := m.wake(ctx, s)
		s.run.Unlock()
		if err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	s.last = run.Now()
	s.mu.Unlock()
	return liveKernel(s)
}

// forgetSnapshot deletes a hibernation snapshot no session needs any more.
func (m *Service) forgetSnapshot(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.deps.Vault.Delete(ctx, id); err != nil {
		m.log.Warn("deleting a hibernation snapshot", "snapshot_id", id, "err", err)
	}
}

// sleepy lists the sessions idle for HibernateAfter, awake, at t, that no
// worker has and whose last failure's delay has passed.
func (m *Service) sleepy(t time.Time) []*Live {
	if m.cfg.HibernateAfter <= 0 || m.deps.Vault == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Live
	for _, s := range m.live {
		s.mu.Lock()
		if s.k != nil && !s.busy && !s.hibernating && s.asleep == "" && t.Sub(s.last) >= m.cfg.HibernateAfter &&
			!t.Before(s.hibRetry) && !kernelEnded(s.k) {
			out = append(out, s)
		}
		s.mu.Unlock()
	}
	return out
}

// Hibernations returns the snapshots this node's sessions hibernate in
// now, or are checkpointed as, and false once the service shuts down: its sessions are then
// leaving for the registry (parked), and what they hold is no longer
// known here.
func (m *Service) Hibernations() (map[string]bool, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, false
	}
	held := make(map[string]bool)
	for _, s := range m.live {
		s.mu.Lock()
		for _, snap := range []string{s.asleep, s.checkpoint} {
			if snap != "" {
				held[snap] = true
			}
		}
		s.mu.Unlock()
	}
	return held, true
}
