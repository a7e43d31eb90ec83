package sandbox

import (
	"log/slog"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox/cgroups"
)

// blockingCgroup is a jail cgroup whose Current waits for release: it
// stands for a reader caught between taking a jail's cgroup and using it.
// Only Current is called on it.
type blockingCgroup struct {
	cgroups.Cgroup
	entered, release chan struct{}
}

func (c *blockingCgroup) Current() (int64, error) {
	close(c.entered)
	<-c.release
	return 0, nil
}

// droppedKeeper records that a cgroup was given back (to be removed or kept
// for reuse). Only Drop is called on it.
type droppedKeeper struct {
	cgroupKeeper
	dropped chan struct{}
}

func (k *droppedKeeper) Drop(cgroups.Cgroup) error {
	close(k.dropped)
	return nil
}

// TestCgroupNotReleasedWhileInUse: a jail's cgroup is not released (and so
// not given to another execution, which would then get this one's limits
// or have its memory read as this one's) while a reader of the jail still
// uses it.
func TestCgroupNotReleasedWhileInUse(t *testing.T) {
	cg := &blockingCgroup{entered: make(chan struct{}), release: make(chan struct{})}
	keeper := &droppedKeeper{dropped: make(chan struct{})}
	j := &Jail{m: &Manager{log: slog.New(slog.DiscardHandler), cgroups: keeper}, cg: cg}
	p := &Process{j: j}
	read := make(chan struct{})
	go func() {
		p.MemoryUsage()
		close(read)
	}()
	<-cg.entered
	released := make(chan struct{})
	go func() {
		_ = j.releaseCgroup()
		close(released)
	}()
	select {
	case <-keeper.dropped:
		t.Error("the cgroup was released while MemoryUsage was reading it")
	case <-time.After(100 * time.Millisecond):
	}
	close(cg.release)
	<-read
	<-released
	select {
	case <-keeper.dropped:
	default:
		t.Error("the cgroup was not released once its reader was done")
	}
}
