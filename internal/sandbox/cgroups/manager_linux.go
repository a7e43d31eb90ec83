package cgroups

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/containerd/cgroups/v3"
)

// Config says where the jails' cgroups go and how many are kept for reuse.
type Config struct {
	// Parent names the cgroup, relative to the server's own, under which
	// every jail gets its own child, e.g. "pyexec".
	Parent string
	// Spares is how many cgroups of finished jails are kept, emptied, for
	// the next jails instead of being removed and made again; 0 keeps none.
	Spares int
	// Logger receives why a cgroup was not reused; nil discards it.
	Logger *slog.Logger
}

// Manager hands jails their cgroups below the parent and takes them back.
// It is safe for concurrent use.
type Manager struct {
	d      driver
	spares spares // vacated cgroups for the next jails
	log    *slog.Logger
}

// New sets up the jails' parent on the host's cgroup version (on cgroup
// v2 that moves the server into its leaf, see serverLeaf).
func New(cfg Config) (*Manager, error) {
	if cfg.Spares < 0 {
		return nil, errors.New("negative number of spare cgroups")
	}
	d, err := newDriver(cfg.Parent)
	if err != nil {
		return nil, err
	}
	m := &Manager{d: d, spares: spares{max: cfg.Spares}, log: cfg.Logger}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	return m, nil
}

// Take gives a jail its cgroup with initial limits: a spare if one can be
// reset, else a new one named id.
func (m *Manager) Take(id string, initial Limits) (Cgroup, error) {
	for cg := m.spares.take(); cg != nil; cg = m.spares.take() {
		err := cg.reuse(initial)
		if err == nil {
			return cg, nil
		}
		m.log.Debug("not reusing a cgroup", "err", err)
		if err := cg.destroy(); err != nil {
			m.log.Warn("removing a cgroup", "err", err)
		}
	}
	return m.d.create(id, initial)
}

// Drop ends a dead jail's use of cg: kept as a spare when it is provably
// vacant and there is room, removed otherwise. The caller must not use cg
// afterwards.
func (m *Manager) Drop(cg Cgroup) error {
	if m.spares.max > 0 {
		err := cg.vacate()
		if err == nil && m.spares.put(cg) {
			return nil
		}
		if err != nil {
			m.log.Debug("not keeping a cgroup for reuse", "err", err)
		}
	}
	return cg.destroy()
}

// Reusing reports whether the cgroups of finished jails are kept for the
// next ones: spares were asked for, and the kernel resets what a reused
// cgroup measures (cgroup v2's memory.peak needs Linux 6.12).
func (m *Manager) Reusing() bool {
	return m.spares.max > 0 && m.d.reusable()
}

// Sweep removes what a crashed predecessor left behind: the jail cgroups
// whose names start with prefix, and the tasks in them. This manager's own
// spares carry the same prefix: they are removed first, not counted, and
// not kept after the sweep.
func (m *Manager) Sweep(prefix string) (int, error) {
	if err := m.removeSpares(false); err != nil {
		return 0, err
	}
	return m.d.sweep(prefix)
}

// Close removes the cgroups kept for reuse and keeps none from then on;
// cgroups dropped after it are removed.
func (m *Manager) Close() error { return m.removeSpares(true) }

// removeSpares removes the cgroups kept for reuse; closing, it keeps none
// from then on.
func (m *Manager) removeSpares(closing bool) error {
	var errs []error
	for _, cg := range m.spares.drain(closing) {
		errs = append(errs, cg.destroy())
	}
	return errors.Join(errs...)
}

// Probe sets up the jails' parent as New does (on cgroup v2 that moves
// this process into its leaf) and creates, with limits l, and removes one
// jail cgroup named id. It returns what it found, or why jails cannot be
// confined with the fix.
func Probe(parent, id string, l Limits) (string, error) {
	if cgroups.Mode() == cgroups.Unavailable {
		return "", errors.New("no cgroup hierarchy is mounted")
	}
	d, err := newDriver(parent)
	if err != nil {
		return "", err
	}
	cg, err := d.create(id, l)
	if err != nil {
		return "", fmt.Errorf("%s; cannot create a jail cgroup: %w", d.describe(), err)
	}
	if err := cg.destroy(); err != nil {
		return "", fmt.Errorf("%s; cannot remove a jail cgroup: %w", d.describe(), err)
	}
	return d.describe(), nil
}
