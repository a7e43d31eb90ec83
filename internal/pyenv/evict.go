package pyenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// List returns the built environments, most recently used first.
func (m *Environments) List() ([]Env, error) {
	entries, err := os.ReadDir(envsDir(m.cfg))
	if err != nil {
		return nil, err
	}
	var out []Env
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		env, err := m.readEnv(e.Name())
		if err != nil {
			m.log.Warn("skipping an unreadable environment", "key", e.Name(), "err", err)
			continue
		}
		env.Base = len(m.base) > 0 && env.Key == m.Key(Interpreter{Path: env.PythonPath, Full: env.Python}, m.base)
		out = append(out, env)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.After(out[j].LastUsed) })
	return out, nil
}

// PruneOptions say what Prune removes.
type PruneOptions struct {
	// MaxBytes: remove least recently used environments until the rest
	// fit; 0 means the configured cap.
	MaxBytes int64
	// All removes every environment not in use, the base ones included.
	All bool
}

// Prune removes environments not in use, least recently used first, and
// returns those removed.
func (m *Environments) Prune(_ context.Context, opts PruneOptions) ([]Env, error) {
	if opts.All {
		return m.evict(-1, true)
	}
	limit := opts.MaxBytes
	if limit == 0 {
		limit = m.cfg.MaxBytes
	}
	return m.evict(limit, false)
}

// evictOver evicts down to limit after a build; failures are logged.
func (m *Environments) evictOver(limit int64) {
	if _, err := m.evict(limit, false); err != nil {
		m.log.Warn("evicting environments", "err", err)
	}
}

// evict removes least recently used environments until the total size is
// at most limit (a negative limit removes all). An environment in use —
// someone holds its use lock, in this process or another — is skipped,
// as is a base environment unless withBase. A layer holds its base's use
// lock while in use, so a base is only removed when none of its layers is
// in use; the layers of a removed base go with it.
func (m *Environments) evict(limit int64, withBase bool) ([]Env, error) {
	m.evictMu.Lock()
	defer m.evictMu.Unlock()
	envs, err := m.List()
	if err != nil {
		return nil, err
	}
	var total int64
	for _, e := range envs {
		total += e.SizeBytes
	}
	var removed []Env
	var errs []error
	for i := len(envs) - 1; i >= 0 && (limit < 0 || total > limit); i-- {
		e := envs[i]
		if e.Base && !withBase {
			continue
		}
		ok, err := m.remove(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			total -= e.SizeBytes
			removed = append(removed, e)
			m.evicts.Add(1)
			m.log.Info("evicted environment", "key", e.Key, "size_bytes", e.SizeBytes, "last_used", e.LastUsed)
		}
	}
	// A layer is of no use without its base: remove those left behind.
	for _, e := range envs {
		if e.BaseKey == "" || slices.ContainsFunc(removed, func(r Env) bool { return r.Key == e.Key }) {
			continue
		}
		if _, err := os.Stat(e.BaseDir); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		ok, err := m.remove(e)
		if err != nil {
			errs = append(errs, err)
		} else if ok {
			removed = append(removed, e)
			m.evicts.Add(1)
			m.log.Info("evicted environment layer with its base", "key", e.Key, "base", e.BaseKey)
		}
	}
	return removed, errors.Join(errs...)
}

// remove deletes one environment unless it is in use. The directory is
// first renamed out of envs/, so that nobody ever sees half of it.
func (m *Environments) remove(e Env) (bool, error) {
	lk, ok, err := tryLock(filepath.Join(lockDir(m.cfg), e.Key+".use"))
	if err != nil || !ok {
		return false, err
	}
	defer lk.unlock()
	trash, err := os.MkdirTemp(tmpDir(m.cfg), e.Key+"-evicted-")
	if err != nil {
		return false, err
	}
	if err := os.Rename(e.Dir, filepath.Join(trash, "env")); err != nil {
		os.Remove(trash)
		return false, fmt.Errorf("evicting %s: %w", e.Key, err)
	}
	return true, os.RemoveAll(trash)
}
