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
	// Conns bounds the connections open at once to one session's port
	// by its owner's key, and apart from those, the connections open
	// through the port's preview URLs together: a URL's holders cannot
	// take the owner's.
	Conns int
	// KeyConns bounds the connections open at once to the previews of
	// all the sessions of one key: those of the owner's key, and apart
	// from those, those through the key's preview URLs together.
	KeyConns int
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
	open map[meterKey]int // by session, port and shared
	keys map[meterKey]int // by owner (in session) and shared
}

type meterKey struct {
	session string
	port    int
	shared  bool // through a preview URL, not the owner's key
}

// NewMeter returns a Meter enforcing lim.
func NewMeter(lim Limits) (*Meter, error) {
	if lim.Conns < 1 || lim.KeyConns < 1 || lim.Bytes < 1 || lim.Idle <= 0 {
		return nil, fmt.Errorf("preview limits must be positive: %+v", lim)
	}
	return &Meter{lim: lim, open: make(map[meterKey]int), keys: make(map[meterKey]int)}, nil
}

// Limits are the limits m enforces.
func (m *Meter) Limits() Limits { return m.lim }

// Acquire counts a connection to t's port, opened through a preview URL
// (shared) or by the owner's key; release uncounts it. ErrTooManyConns
// when those have Limits.Conns already, or those of t's owner
// Limits.KeyConns.
func (m *Meter) Acquire(t Target, shared bool) (release func(), err error) {
	k := meterKey{session: t.Session, port: t.Port, shared: shared}
	kk := meterKey{session: t.Owner, shared: shared}
	by := "the owner's key"
	if shared {
		by = "preview URLs"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open[k] >= m.lim.Conns {
		return nil, fmt.Errorf("%w (%d to this port by %s, --preview-max-conns)", ErrTooManyConns, m.lim.Conns, by)
	}
	if m.keys[kk] >= m.lim.KeyConns {
		return nil, fmt.Errorf("%w (%d to this key's sessions by %s, --preview-max-key-conns)", ErrTooManyConns, m.lim.KeyConns, by)
	}
	m.open[k]++
	m.keys[kk]++
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.open[k]--; m.open[k] <= 0 {
				delete(m.open, k)
			}
			if m.keys[kk]--; m.keys[kk] <= 0 {
				delete(m.keys, kk)
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
