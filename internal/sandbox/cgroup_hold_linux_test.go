package sandbox

import (
	"log/slog"
	"testing"
	"time"
)

// blockingCgroup is a jail cgroup whose current() waits for release: it
// stands for a reader caught between taking a jail's cgroup and using it.
type blockingCgroup struct {
	v1Jail
	entered, release, destroyed chan struct{}
}

func (c *blockingCgroup) current() (int64, error) {
	close(c.entered)
	<-c.release
	return 0, nil
}

func (c *blockingCgroup) destroy() error {
	close(c.destroyed)
	return nil
}

// TestCgroupNotReleasedWhileInUse: a jail's cgroup is not released (and so
// not given to another execution, which would then get this one's limits
// or have its memory read as this one's) while a reader of the jail still
// uses it.
func TestCgroupNotReleasedWhileInUse(t *testing.T) {
	cg := &blockingCgroup{entered: make(chan struct{}), release: make(chan struct{}), destroyed: make(chan struct{})}
	j := &Jail{m: &Manager{log: slog.New(slog.DiscardHandler)}, cg: cg}
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
	case <-cg.destroyed:
		t.Error("the cgroup was released while MemoryUsage was reading it")
	case <-time.After(100 * time.Millisecond):
	}
	close(cg.release)
	<-read
	<-released
	select {
	case <-cg.destroyed:
	default:
		t.Error("the cgroup was not released once its reader was done")
	}
}
