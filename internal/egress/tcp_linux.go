package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// tcpBuffer is the send and the receive buffer of each of the jail's
// connections in netstack.
const tcpBuffer = 256 << 10

// relayBuffer is what one direction of a relay reads at a time.
const relayBuffer = 32 << 10

// target is where a connection of the jail is headed, as decided.
type target struct {
	host  string       // the name connected to, or the address
	name  string       // the name, "" for an IP literal
	addrs []netip.Addr // what may be dialled
	port  uint16
	// byAddress is set once dialled when an address rule allows the
	// address dialled on its own: only then may a connection to a name
	// carry what is neither TLS nor HTTP.
	byAddress bool
}

// handleTCP decides each connection the jail opens, before its
// handshake: a refused one is reset, an allowed one is dialled first, so
// that the payload sees the destination's own refusal as a reset too.
func (e *Egress) handleTCP(r *tcp.ForwarderRequest) {
	id := r.ID()
	dst, port := addrOf(id.LocalAddress), id.LocalPort
	t, ev := e.decide(dst, port)
	if ev.Verdict == VerdictDeny {
		r.Complete(true)
		e.emit(ev)
		return
	}
	if n := e.active.Add(1); n > int64(e.cfg.Limits.MaxConns) {
		e.active.Add(-1)
		r.Complete(true)
		ev.Verdict, ev.Reason = VerdictDeny, ReasonConnectionLimit
		e.emit(ev)
		e.overLimit(ReasonConnectionLimit)
		return
	}
	rl := &relay{e: e, ev: ev}
	if !e.track(rl) {
		e.active.Add(-1)
		r.Complete(true)
		return
	}
	defer e.untrack(rl)
	defer e.active.Add(-1)
	up, addr, err := e.dial(t)
	if err != nil {
		r.Complete(true)
		rl.ev.Verdict, rl.ev.Reason = VerdictError, ReasonConnectFailed
		e.emit(rl.ev)
		return
	}
	rl.ev.Addr = addr.String()
	t.byAddress = e.policy.AddrAllowed(addr, port)
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		r.Complete(true)
		up.Close()
		rl.ev.Verdict, rl.ev.Reason = VerdictError, ReasonClosed
		e.emit(rl.ev)
		return
	}
	r.Complete(false)
	rl.run(gonet.NewTCPConn(&wq, ep), up, t)
	e.emit(rl.ev)
}

// decide applies the guard and the policy to a destination; ev is the
// event of the attempt, its verdict VerdictDeny when refused.
func (e *Egress) decide(dst netip.Addr, port uint16) (target, Event) {
	ev := Event{Proto: "tcp", Host: dst.String(), Port: port, Verdict: VerdictAllow}
	deny := func(reason string) (target, Event) {
		ev.Verdict, ev.Reason = VerdictDeny, reason
		return target{}, ev
	}
	if isSynthetic(dst) {
		en := e.names.lookupAddr(dst)
		if en == nil {
			return deny(ReasonUnknownAddress)
		}
		ev.Host = en.name
		if !e.policy.NameAllowed(en.name, port) {
			return deny(ReasonNotAllowed)
		}
		var addrs []netip.Addr
		reason := ""
		for _, a := range en.real {
			if r := e.cfg.Guard.Check(a, port); r != "" {
				reason = r
				continue
			}
			if e.policy.AddrDenied(a, port) {
				reason = ReasonNotAllowed
				continue
			}
			addrs = append(addrs, a)
		}
		if len(addrs) == 0 {
			return deny(reason)
		}
		return target{host: en.name, name: en.name, addrs: addrs, port: port}, ev
	}
	dst = dst.Unmap()
	if r := e.cfg.Guard.Check(dst, port); r != "" {
		return deny(r)
	}
	if !e.policy.AddrAllowed(dst, port) {
		return deny(ReasonNotAllowed)
	}
	if e.ruledAddress(dst, port) {
		return deny(ReasonRuledAddress)
	}
	return target{host: dst.String(), addrs: []netip.Addr{dst}, port: port}, ev
}

// dial connects to the first of t's addresses that answers within the
// connect timeout.
func (e *Egress) dial(t target) (net.Conn, netip.Addr, error) {
	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.Limits.ConnectTimeout)
	defer cancel()
	var d net.Dialer
	var errs []error
	for _, a := range t.addrs {
		c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort(a.String(), strconv.Itoa(int(t.port))))
		if err == nil {
			return c, a, nil
		}
		errs = append(errs, err)
	}
	return nil, netip.Addr{}, errors.Join(errs...)
}

// relay is one allowed connection: the jail's side in netstack, the
// destination's a socket of this process.
type relay struct {
	e  *Egress
	ev Event

	mu       sync.Mutex
	down, up net.Conn
	cutWhy   string
}

// cut closes both sides; why becomes the event's reason unless it has
// one. Called with e.mu held.
func (r *relay) cut(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cutWhy == "" {
		r.cutWhy = why
	}
	if r.down != nil {
		r.down.Close()
	}
	if r.up != nil {
		r.up.Close()
	}
}

// run checks the first bytes of a connection to a name, then copies both
// ways until both are done, counting bytes against the limits. Such a
// connection must prove to be for its name before a byte reaches the
// destination: a TLS ClientHello naming it (and a second one, when the
// server asks for one, naming it too), or HTTP/1.x requests whose every
// head names it. Anything else goes through only when an address rule
// allows the address dialled.
func (r *relay) run(down, up net.Conn, t target) {
	r.mu.Lock()
	r.down, r.up = down, up
	cut := r.cutWhy != ""
	r.mu.Unlock()
	defer down.Close()
	defer up.Close()
	if cut {
		r.finish()
		return
	}
	if r.e.intercepts(t.name, t.port) {
		r.refused(r.intercept(down, up, t))
		return
	}
	// What the destination sends flows at once (a server may speak
	// first); what the payload sends is held until its first bytes are
	// checked against the name it connected to.
	var from io.Reader = up
	var sh *serverHello
	if t.name != "" {
		sh = newServerHello()
		from = watched{up, sh}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.copy(down, from, nil, false)
		if sh != nil {
			sh.see(nil, io.EOF) // nothing more will tell how it answered
		}
	}()
	var op opening
	if t.name != "" {
		op = inspect(down, t.name)
		if op.kind == streamOther && len(op.first) > 0 && !t.byAddress {
			op.reason = ReasonUnrecognised
		}
	}
	reason := op.reason
	switch {
	case reason != "":
	case op.kind == streamHTTP:
		reason = r.forwardHTTP(up, down, op, t)
		closeWrite(up)
	case op.kind == streamTLS:
		reason = r.forwardTLS(up, down, op, sh, t.name)
		closeWrite(up)
	}
	if reason != "" {
		r.refused(reason)
		down.Close()
		up.Close()
		wg.Wait()
		return
	}
	if op.kind == streamOther {
		r.copy(up, down, op.first, true)
	}
	wg.Wait()
	r.finish()
}

// refused records why the connection was refused ("" if it was not): the
// destination's or the payload's TLS failing is an error, the rest a
// refusal.
func (r *relay) refused(reason string) {
	if reason == "" {
		r.finish()
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ev.Verdict, r.ev.Reason = VerdictDeny, reason
	if reason == ReasonDestinationTLS || reason == ReasonPayloadTLS {
		r.ev.Verdict = VerdictError
	}
}

// finish records why the relay was cut, if it was.
func (r *relay) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cutWhy != "" && r.ev.Reason == "" {
		r.ev.Reason = r.cutWhy
		if r.cutWhy != ReasonClosed {
			r.ev.Verdict = VerdictDeny
		}
	}
}

// copy relays src to dst, after writing first; out tells the direction
// (payload → destination). On the end of src it half-closes dst.
func (r *relay) copy(dst net.Conn, src io.Reader, first []byte, out bool) {
	defer closeWrite(dst)
	if len(first) > 0 {
		if !r.count(len(first), out) {
			return
		}
		if _, err := dst.Write(first); err != nil {
			return
		}
	}
	buf := make([]byte, relayBuffer)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !r.count(n, out) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.mu.Lock()
				r.down.Close()
				r.up.Close()
				r.mu.Unlock()
			}
			return
		}
	}
}

// count adds n bytes to the connection and the execution; false when
// that goes over a limit (the egress then cuts everything).
func (r *relay) count(n int, out bool) bool {
	e := r.e
	if out {
		r.mu.Lock()
		r.ev.BytesOut += int64(n)
		r.mu.Unlock()
		if e.bytesOut.Add(int64(n)) > e.cfg.Limits.BytesOut {
			e.overLimit(ReasonBytesOutLimit)
			return false
		}
		return true
	}
	r.mu.Lock()
	r.ev.BytesIn += int64(n)
	r.mu.Unlock()
	if e.bytesIn.Add(int64(n)) > e.cfg.Limits.BytesIn {
		e.overLimit(ReasonBytesInLimit)
		return false
	}
	return true
}

// closeWrite half-closes c where it can, else closes it.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}
