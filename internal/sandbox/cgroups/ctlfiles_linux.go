package cgroups

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// ctlFiles keeps the control files a jail's cgroup reads and writes on
// every execution open for the cgroup's life: opening one by path walks
// every component through kernfs, and that walk plus the open and close
// cost the server more than the read or write itself. Each access is a
// pread or pwrite at offset 0, which the kernel serves as a fresh read
// (the file is generated again) or a fresh write.
//
// The descriptors are close-on-exec and named nowhere else: a fork server
// gets only the descriptors of its request (Template.request), a cold
// jail's init only cmd.ExtraFiles. A mutex covers each access and close,
// so that no access ever reaches a descriptor number closed and reused
// meanwhile; after close every access fails.
type ctlFiles struct {
	mu     sync.Mutex
	fds    map[ctlKey]int
	closed bool
}

// ctlKey names one open control file: its cgroup directory, its name and
// how it was opened (a read-only file cannot be opened for writing, and a
// v2 memory.peak is read through the descriptor its reset was written to).
type ctlKey struct {
	dir, name string
	flag      int // unix.O_RDONLY, O_WRONLY or O_RDWR
}

// ctlReadMax bounds what one control file read may return: more (a
// cpu.stat grown by a new kernel's lines) is an error, not a silent cut.
const ctlReadMax = 1024

// errCtlClosed is the error of an access after close.
var errCtlClosed = errors.New("the cgroup's control files are closed")

// with calls f with the descriptor of key, opened now if it is not yet,
// holding the mutex.
func (c *ctlFiles) with(key ctlKey, f func(fd int) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errCtlClosed
	}
	fd, ok := c.fds[key]
	if !ok {
		path := key.dir + "/" + key.name
		var err error
		fd, err = unix.Open(path, key.flag|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		for errors.Is(err, unix.EINTR) {
			fd, err = unix.Open(path, key.flag|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		}
		if err != nil {
			return &os.PathError{Op: "open", Path: path, Err: err}
		}
		if c.fds == nil {
			c.fds = make(map[ctlKey]int)
		}
		c.fds[key] = fd
	}
	return f(fd)
}

// write writes val to dir/name (open for writing only).
func (c *ctlFiles) write(dir, name, val string) error {
	return c.writeVia(ctlKey{dir, name, unix.O_WRONLY}, val)
}

// writeVia writes val through the descriptor of key.
func (c *ctlFiles) writeVia(key ctlKey, val string) error {
	return c.with(key, func(fd int) error {
		n, err := unix.Pwrite(fd, []byte(val), 0)
		for errors.Is(err, unix.EINTR) {
			n, err = unix.Pwrite(fd, []byte(val), 0)
		}
		if err == nil && n < len(val) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return &os.PathError{Op: "write", Path: key.dir + "/" + key.name, Err: err}
		}
		return nil
	})
}

// readVia reads the whole file of key and hands what it holds to parse.
func (c *ctlFiles) readVia(key ctlKey, parse func([]byte) error) error {
	return c.with(key, func(fd int) error {
		var buf [ctlReadMax]byte
		n, err := unix.Pread(fd, buf[:], 0)
		for errors.Is(err, unix.EINTR) {
			n, err = unix.Pread(fd, buf[:], 0)
		}
		switch {
		case err != nil:
			return &os.PathError{Op: "read", Path: key.dir + "/" + key.name, Err: err}
		case n == len(buf):
			return fmt.Errorf("%s/%s holds more than %d bytes", key.dir, key.name, len(buf)-1)
		}
		return parse(buf[:n])
	})
}

// readInt reads dir/name, one decimal integer (open for reading only).
func (c *ctlFiles) readInt(dir, name string) (int64, error) {
	return c.readIntVia(ctlKey{dir, name, unix.O_RDONLY})
}

// readIntVia reads the decimal integer of the file of key.
func (c *ctlFiles) readIntVia(key ctlKey) (v int64, err error) {
	err = c.readVia(key, func(b []byte) (perr error) {
		v, perr = parseInt(b)
		return perr
	})
	return v, err
}

// readKey reads the value of key in dir/name, "key value" lines; a
// missing key reads as 0.
func (c *ctlFiles) readKey(dir, name, key string) (v int64, err error) {
	err = c.readVia(ctlKey{dir, name, unix.O_RDONLY}, func(b []byte) (perr error) {
		v, perr = parseKey(b, key)
		return perr
	})
	return v, err
}

// close closes every descriptor; every access after it fails.
func (c *ctlFiles) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, fd := range c.fds {
		_ = unix.Close(fd)
	}
	c.fds, c.closed = nil, true
}

// parseInt parses a file holding one decimal integer.
func parseInt(b []byte) (int64, error) {
	return strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
}

// parseKey returns the value of key in "key value" lines (memory.events,
// cpu.stat, oom_control); a missing key reads as 0.
func parseKey(b []byte, key string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(" "))
		if ok && string(k) == key {
			return strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, nil
}
