package executions

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/store"
)

// Store states reported by StoreStats.
const (
	StoreOK        = "ok"         // below StoreNearFraction of the limit, or no limit
	StoreNearLimit = "near_limit" // at or above StoreNearFraction of the limit
	StoreFull      = "full"       // above the limit with nothing finished left to evict
)

// StoreNearFraction of StoreMaxBytes is where the store is reported near
// its limit.
const StoreNearFraction = 0.9

// evictBatch is how many eviction candidates are taken from the index at
// a time; the store is measured again after each one.
const evictBatch = 16

// StoreStats says how full the shared store is.
type StoreStats struct {
	UsedBytes int64 // records, index, events, request payloads, artifacts
	MaxBytes  int64 // Config.StoreMaxBytes; 0: no limit
	Evictions uint64
	State     string // StoreOK, StoreNearLimit or StoreFull
	// Measured is when UsedBytes was read; zero before the first reading.
	Measured time.Time
}

// storeGauge is the latest StoreStats; the eviction loop writes it.
type storeGauge struct {
	mu    sync.Mutex
	stats StoreStats
	kick  chan struct{}
}

func newStoreGauge(limit int64) *storeGauge {
	return &storeGauge{stats: StoreStats{MaxBytes: limit, State: StoreOK}, kick: make(chan struct{}, 1)}
}

// StoreStats reports how full the store was at its last measurement
// (every Config.EvictInterval, and after executions end).
func (e *Service) StoreStats() StoreStats {
	e.gauge.mu.Lock()
	defer e.gauge.mu.Unlock()
	return e.gauge.stats
}

// kickEviction asks the eviction loop to measure now.
func (e *Service) kickEviction() {
	select {
	case e.gauge.kick <- struct{}{}:
	default:
	}
}

// evictKickGap is the least time between two measurements asked for by
// ending executions. A measurement reads every stream's state and walks
// the index: after every execution it cost a busy server about a tenth of
// its CPU. The kicks that arrive within the gap are served by one round
// at its end.
const evictKickGap = 100 * time.Millisecond

// evictKickGapRoomy is that gap while the last measurement found the store
// below half its limit (or it has none): then nothing needs evicting soon,
// and only the gauge waits. At 100 ms the five stream-state requests of a
// measurement were ≈ 6 % of a busy server's CPU (engine and NATS sides).
const evictKickGapRoomy = time.Second

// kickGap is the gap before the next kicked measurement, from the last
// one's finding.
func (e *Service) kickGap() time.Duration {
	limit := e.cfg.StoreMaxBytes
	if s := e.StoreStats(); limit == 0 || s.UsedBytes < limit/2 {
		return evictKickGapRoomy
	}
	return evictKickGap
}

// evictLoop measures the store and, above Config.StoreMaxBytes, evicts
// the oldest finished records until it is below again: every
// Config.EvictInterval, and when an ending execution asks (kickEviction),
// at most once per kickGap — a kick within the gap is served at its end,
// while the periodic rounds go on.
func (e *Service) evictLoop(ctx context.Context) {
	t := time.NewTicker(e.cfg.EvictInterval)
	defer t.Stop()
	var next time.Time        // no kicked round before then
	var held <-chan time.Time // fires at next while a kick waits for it
	kicked := false           // the round about to run serves a kick
	for {
		if err := e.evict(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("measuring or evicting the store", "err", err)
		}
		if kicked {
			next, kicked = time.Now().Add(e.kickGap()), false
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				waiting = false
			case <-held:
				held, kicked, waiting = nil, true, false
			case <-e.gauge.kick:
				if d := time.Until(next); d <= 0 {
					kicked, waiting = true, false
				} else if held == nil {
					held = time.After(d)
				}
			}
		}
	}
}

// evict runs one round: measure, and while above the limit, remove the
// oldest finished execution (never a pending or running one) and measure
// again, so that no more is removed than the limit asks for.
func (e *Service) evict(ctx context.Context) error {
	limit := e.cfg.StoreMaxBytes
	e.st.ForgetExpired()
	used, err := e.st.Usage(ctx)
	if err != nil {
		return err
	}
	for limit > 0 && used > limit {
		ids := e.st.OldestFinished(evictBatch)
		if len(ids) == 0 {
			e.setGauge(used, 0, true)
			return nil
		}
		for _, id := range ids {
			ok, err := e.evictOne(ctx, id)
			if err != nil {
				return err
			}
			if used, err = e.st.Usage(ctx); err != nil {
				return err
			}
			if ok {
				e.setGauge(used, 1, false)
			}
			if used <= limit {
				break
			}
		}
	}
	e.setGauge(used, 0, false)
	return nil
}

func (e *Service) setGauge(used int64, evicted int, full bool) {
	e.gauge.mu.Lock()
	defer e.gauge.mu.Unlock()
	s := &e.gauge.stats
	s.UsedBytes, s.Measured = used, time.Now()
	s.Evictions += uint64(evicted)
	switch {
	case full:
		s.State = StoreFull
	case s.MaxBytes > 0 && float64(used) >= StoreNearFraction*float64(s.MaxBytes):
		s.State = StoreNearLimit
	default:
		s.State = StoreOK
	}
}

// evictOne removes a finished execution: its artifacts, events, request
// payload, record and index entry. A record that is not final after all
// (its index entry lagged) is left alone and its entry repaired.
func (e *Service) evictOne(ctx context.Context, id string) (bool, error) {
	r, _, err := e.load(ctx, id)
	if errors.Is(err, run.ErrNotFound) {
		return false, e.st.Delete(ctx, id) // only the index entry was left
	}
	if err != nil {
		return false, err
	}
	if !r.Status.Final() {
		return false, e.st.SetMeta(ctx, id, r.meta())
	}
	paths := make([]string, len(r.Files))
	for i, f := range r.Files {
		paths[i] = f.Path
	}
	if err := e.st.DeleteArtifacts(ctx, id, paths); err != nil {
		return false, err
	}
	if err := e.st.PurgeEvents(ctx, id); err != nil {
		return false, err
	}
	if err := e.st.DeleteRequest(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	if err := e.st.Delete(ctx, id); err != nil {
		return false, err
	}
	e.log.Info("evicted a finished execution", "execution_id", id, "status", r.Status)
	return true, nil
}
