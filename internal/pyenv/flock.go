package pyenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lockPoll is how often a lock held by another process is tried again.
const lockPoll = 100 * time.Millisecond

// fileLock is an flock(2) lock on a file of the locks directory. flock
// locks belong to an open file description, so two locks taken by this
// process on the same file conflict just as they would across processes.
type fileLock struct{ f *os.File }

func openLockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	return f, nil
}

// lockWait takes the lock (shared or exclusive), polling until ctx ends.
func lockWait(ctx context.Context, path string, exclusive bool) (*fileLock, error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return &fileLock{f: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, os.NewSyscallError("flock", err))
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// tryLock takes an exclusive lock if nobody holds the file locked.
func tryLock(path string) (*fileLock, bool, error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, false, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("locking %s: %w", path, os.NewSyscallError("flock", err))
	}
	return &fileLock{f: f}, true, nil
}

// unlock releases the lock (closing the file releases it).
func (l *fileLock) unlock() { l.f.Close() }
