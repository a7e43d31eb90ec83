package preview

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTooManyConns: the preview already has Limits.Conns connections open
// (429).
var ErrTooManyConns = errors.New("too many open connections to this preview")

// Limits bound what one preview (a session's port) may cost the server.
type Limits struct {
	// Conns bounds the connections open at once to one session's port,
	// whoever opened them (the owner's key and every share).
	Conns int
	// Bytes bounds what one connection carries, both ways together; the
	// connection is closed once it is reached.
	Bytes int64
	// Idle closes a connection that carried nothing either way for that
	// long (a WebSocket included).
	Idle time.Duration
}

// Meter counts the open connections of every preview of this server and
// wraps each in its byte and idle limits. Safe for concurrent use.
type Meter struct {
	lim  Limits
	mu   sync.Mutex
	open map[Target]int // by session and port; Owner left empty
}

// NewMeter returns a Meter enforcing lim.
func NewMeter(lim Limits) (*Meter, error) {
	if lim.Conns < 1 || lim.Bytes < 1 || lim.Idle <= 0 {
		return nil, fmt.Errorf("preview limits must be positive: %+v", lim)
	}
	return &Meter{lim: lim, open: make(map[Target]int)}, nil
}

// Limits are the limits m enforces.
func (m *Meter) Limits() Limits { return m.lim }

// Acquire counts a connection to session's port; release uncounts it.
// ErrTooManyConns when the port has Limits.Conns already.
func (m *Meter) Acquire(session string, port int) (release func(), err error) {
	k := Target{Session: session, Port: port}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open[k] >= m.lim.Conns {
		return nil, fmt.Errorf("%w (%d, --preview-max-conns)", ErrTooManyConns, m.lim.Conns)
	}
	m.open[k]++
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.open[k]--; m.open[k] <= 0 {
				delete(m.open, k)
			}
		})
	}, nil
}

// Wrap bounds c by the byte and idle limits: past Bytes, or after Idle
// without a byte either way, c is closed (what the proxy copies then
// ends).
func (m *Meter) Wrap(c net.Conn) net.Conn {
	mc := &meteredConn{Conn: c, limit: m.lim.Bytes, idle: m.lim.Idle}
	mc.timer = time.AfterFunc(m.lim.Idle, func() { _ = c.Close() })
	return mc
}

// meteredConn is a connection into a jail with the preview's limits.
type meteredConn struct {
	net.Conn
	limit int64
	idle  time.Duration
	used  atomic.Int64
	timer *time.Timer
}

// errBytes ends a connection past its byte limit.
var errBytes = errors.New("preview connection reached its byte limit (--preview-max-bytes)")

func (c *meteredConn) count(n int) error {
	c.timer.Reset(c.idle)
	if c.used.Add(int64(n)) > c.limit {
		_ = c.Conn.Close()
		return errBytes
	}
	return nil
}

func (c *meteredConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		if lerr := c.count(n); lerr != nil {
			return n, lerr
		}
	}
	return n, err
}

func (c *meteredConn) Write(b []byte) (int, error) {
	if c.used.Load()+int64(len(b)) > c.limit {
		_ = c.Conn.Close()
		return 0, errBytes
	}
	n, err := c.Conn.Write(b)
	if n > 0 {
		if lerr := c.count(n); lerr != nil && err == nil {
			err = lerr
		}
	}
	return n, err
}

func (c *meteredConn) Close() error {
	c.timer.Stop()
	return c.Conn.Close()
}
