package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Egress is the route out of one execution's jail. It implements
// sandbox.Egress; its owner closes it once the payload is gone.
type Egress struct {
	cfg    Config
	policy Policy
	grant  Grant
	hooks  Hooks

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// out carries events to the owner's hook from one goroutine, so that
	// a slow hook (a store write) never holds up a DNS answer or a
	// handshake. It holds the budgets of lookups and of other events
	// (MaxEvents each): only a secret's or a limit's event ever waits.
	out     chan Event
	outDone chan struct{}
	// sent counts the events put on out, delivered those the hook has
	// returned from; each delivery closes progress (under dmu) and
	// replaces it. Sync waits for delivered to reach sent.
	sent, delivered atomic.Int64
	dmu             sync.Mutex
	progress        chan struct{}

	mu     sync.Mutex
	stack  *stack.Stack
	tun    *os.File
	tunFD  int                // tun's descriptor, read once (Fd would make it blocking)
	link   stack.LinkEndpoint // the TUN's reader, stopped by detaching its queue
	conns  map[*relay]struct{}
	closed bool
	// outClosed is set when out is closed: only Finish, once every
	// handler is done; a straggler's event is then only counted.
	outClosed bool
	names     *nameTable
	udpSeen   map[string]bool
	// terminated are the names whose TLS this execution had the egress
	// terminate (at most maxTerminatedNames).
	terminated map[string]bool
	// sessions are the TLS sessions of the destinations whose TLS the
	// egress terminated, so that the execution's next connection to one
	// resumes its session (the destination's certificate was verified
	// when it began, and its name and expiry are checked again on each
	// resumption) instead of a full handshake. An execution's own only.
	sessions tls.ClientSessionCache

	active            atomic.Int64 // TCP connections open or being dialled
	dnsBusy           atomic.Int64 // DNS flows whose first query is being answered
	dnsLingering      atomic.Int64 // DNS flows waiting for another query
	bytesOut, bytesIn atomic.Int64
	events, dropped   atomic.Int64 // reported, and dropped past a budget
	kept, lookups     atomic.Int64 // counted against the budgets of other events and of lookups
	limited           atomic.Bool
	limitReason       atomic.Value // string
}

var _ sandbox.Egress = (*Egress)(nil)

// New makes the egress of one execution, with what g grants it: the
// operator's policy in cfg narrowed, and its secrets.
func New(cfg Config, g Grant, hooks Hooks) *Egress {
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Egress{cfg: cfg, policy: g.Policy, grant: g, hooks: hooks, ctx: ctx, cancel: cancel,
		out: make(chan Event, 2*cfg.Limits.MaxEvents), outDone: make(chan struct{}),
		conns: map[*relay]struct{}{}, names: newNameTable(), udpSeen: map[string]bool{},
		terminated: map[string]bool{}, sessions: tls.NewLRUClientSessionCache(maxTerminatedNames),
		progress: make(chan struct{})}
	go e.deliver()
	return e
}

// deliver hands events to the hook until Close closes out.
func (e *Egress) deliver() {
	defer close(e.outDone)
	for ev := range e.out {
		if e.hooks.Event != nil {
			e.hooks.Event(ev)
		}
		e.delivered.Add(1)
		e.dmu.Lock()
		close(e.progress)
		e.progress = make(chan struct{})
		e.dmu.Unlock()
	}
}

// Sync returns once the hook has had every event reported so far, or
// when ctx ends (false): a session calls it at the end of a cell, so that
// what was refused before its code saw the answer (a lookup, an HTTP
// request) comes with the cell's result. A connection's event is
// reported when it ends, which may be after.
func (e *Egress) Sync(ctx context.Context) bool {
	sent := e.sent.Load()
	for {
		e.dmu.Lock()
		progress := e.progress
		e.dmu.Unlock()
		if e.delivered.Load() >= sent {
			return true
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return false
		}
	}
}

// Serve starts the userspace stack on tun: every IPv4 and IPv6 packet of
// the jail ends there, whatever its destination.
func (e *Egress) Serve(tun *os.File) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("egress closed")
	}
	if e.stack != nil {
		return errors.New("egress already serving")
	}
	fd := int(tun.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		return os.NewSyscallError("setnonblock", err)
	}
	link, err := fdbased.New(&fdbased.Options{FDs: []int{fd}, MTU: sandbox.EgressMTU})
	if err != nil {
		return fmt.Errorf("netstack link: %w", err)
	}
	if err := e.serveLink(link); err != nil {
		return err
	}
	e.tun, e.tunFD = tun, fd
	return nil
}

// serveLink starts the userspace stack on link. Called with e.mu held.
func (e *Egress) serveLink(link stack.LinkEndpoint) error {
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	// The handlers are in place before the NIC exists: packets are
	// delivered from the moment it does.
	sack := tcpip.TCPSACKEnabled(true)
	_ = s.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)
	// netstack's default buffers (1 MiB, growing to 4 MiB each way) would
	// let a payload that opens its connections and never reads pin
	// hundreds of MiB of the server's memory; the jail's link is local,
	// so small windows cost little throughput.
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: tcpBuffer, Max: tcpBuffer}
	_ = s.SetTransportProtocolOption(tcp.ProtocolNumber, &snd)
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: tcpBuffer, Max: tcpBuffer}
	_ = s.SetTransportProtocolOption(tcp.ProtocolNumber, &rcv)
	tcpFwd := tcp.NewForwarder(s, 0, 256, e.handleTCP)
	s.SetTransportProtocolHandler(tcp.ProtocolNumber, tcpFwd.HandlePacket)
	udpFwd := udp.NewForwarder(s, e.handleUDP)
	s.SetTransportProtocolHandler(udp.ProtocolNumber, udpFwd.HandlePacket)
	const nic = 1
	if terr := s.CreateNIC(nic, link); terr != nil {
		s.Close()
		return fmt.Errorf("netstack nic: %s", terr)
	}
	// Promiscuous and spoofing: the stack takes packets for every
	// destination and answers as that destination.
	terr := s.SetPromiscuousMode(nic, true)
	if terr == nil {
		terr = s.SetSpoofing(nic, true)
	}
	if terr != nil {
		_ = s.RemoveNIC(nic) // stops the link's reader
		s.Close()
		s.Wait()
		return fmt.Errorf("netstack: %s", terr)
	}
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: nic}, {Destination: header.IPv6EmptySubnet, NIC: nic}})
	e.stack, e.link = s, link
	return nil
}

// Close cuts every connection, stops the stack and returns once every
// event is out and the device is gone. It is safe to call more than once.
func (e *Egress) Close() error { return e.Finish()() }

// Finish ends the egress's part in its execution, whose payload is gone:
// it cuts every connection, waits for every handler and returns once
// every event is out, so that the execution's record can be made. What
// is left is the teardown it returns, for the caller to run once: it
// removes the TUN device, stops the stack and closes the device's file
// (the kernel's removal of a device takes tens of milliseconds, which an
// execution's answer need not wait for). Until then the stack may still
// read the device, but nothing it reads goes anywhere: once Finish has
// begun every handler refuses, and no event is reported. Only the first
// call's teardown does anything, once however often it is called (its
// device's descriptor number may belong to another device by then); a
// later call's returns nil.
func (e *Egress) Finish() (teardown func() error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return func() error { return nil }
	}
	e.closed = true
	s, tun, fd, link := e.stack, e.tun, e.tunFD, e.link
	for r := range e.conns {
		r.cut(ReasonClosed)
	}
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
	// Every handler is done and no new one starts (track and goTracked
	// refuse once closed): the last events go out now. A straggler's
	// event (a refusal the stack is still delivering) is only counted.
	e.mu.Lock()
	e.outClosed = true
	close(e.out)
	e.mu.Unlock()
	<-e.outDone
	return sync.OnceValue(func() error { return stopStack(s, tun, fd, link) })
}

// stopStack stops the stack s reading the TUN device tun (descriptor
// fd, read by link) and closes tun; either may be nil.
func stopStack(s *stack.Stack, tun *os.File, fd int, link stack.LinkEndpoint) error {
	if s != nil {
		// The link's reader must have ended before the NIC is removed:
		// RemoveNIC holds the link's lock while it waits for the reader,
		// and a reader delivering a packet at that moment (the jail's
		// kernel retransmits until the namespace dies, which our open TUN
		// prevents) waits for the same lock — both would wait forever.
		// Removing the device first means no packet can be read any more
		// and wakes the reader where it waits in poll: its next read
		// fails and it ends at once, or as soon as a delivery already
		// under way is done. Where the device cannot be removed, its
		// queue is detached instead, which does not wake the reader: a
		// delivery under way then gets readerDrain to finish (the reader
		// ends by itself if its read fails, else RemoveNIC stops it while
		// it waits in poll, holding no packet).
		if tun == nil || removeDevice(fd) == nil || detachQueue(fd) == nil {
			ended := make(chan struct{})
			go func() { link.Wait(); close(ended) }()
			select {
			case <-ended:
			case <-time.After(readerDrain):
			}
		}
		_ = s.RemoveNIC(1)
		s.Close()
		s.Wait()
	}
	if tun != nil {
		return tun.Close()
	}
	return nil
}

// Stats reports the totals so far.
func (e *Egress) Stats() Stats {
	st := Stats{BytesOut: e.bytesOut.Load(), BytesIn: e.bytesIn.Load(), Events: e.events.Load(), Dropped: e.dropped.Load()}
	if r, ok := e.limitReason.Load().(string); ok {
		st.LimitReason = r
	}
	return st
}

// emit reports ev unless its budget is spent. Lookups (dns events
// without a secret) have a budget of their own, so that a payload
// looking up endless names cannot spend the others'. A secret's event
// (an injection, a placeholder refused) and the event that trips a limit
// are never dropped: past the buffer their send waits for the hook,
// which slows only the payload that makes them.
func (e *Egress) emit(ev Event) {
	priority := ev.Secret != "" || isLimit(ev.Reason) && !e.limited.Load()
	switch {
	case priority:
		e.events.Add(1)
	case ev.Proto == "dns":
		if e.lookups.Add(1) > int64(e.cfg.Limits.MaxEvents) {
			e.dropped.Add(1)
			return
		}
		e.events.Add(1)
	case e.kept.Add(1) > int64(e.cfg.Limits.MaxEvents):
		e.dropped.Add(1)
		return
	default:
		e.events.Add(1)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.outClosed { // a straggler after Finish: dropped, not reported
		e.events.Add(-1)
		e.dropped.Add(1)
		return
	}
	e.sent.Add(1)
	e.out <- ev
}

// isLimit reports whether reason is one of the limits that cut an
// execution's network.
func isLimit(reason string) bool {
	switch reason {
	case ReasonConnectionLimit, ReasonBytesOutLimit, ReasonBytesInLimit:
		return true
	}
	return false
}

// overLimit records the first limit crossed, cuts every connection and
// tells the owner, who ends the execution.
func (e *Egress) overLimit(reason string) {
	if !e.limited.CompareAndSwap(false, true) {
		return
	}
	e.limitReason.Store(reason)
	e.mu.Lock()
	for r := range e.conns {
		r.cut(reason)
	}
	e.mu.Unlock()
	if e.hooks.Limit != nil {
		e.hooks.Limit(reason)
	}
}

// track registers a live relay; it fails once the egress is closed or
// limited.
func (e *Egress) track(r *relay) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.limited.Load() {
		return false
	}
	e.conns[r] = struct{}{}
	e.wg.Add(1)
	return true
}

func (e *Egress) untrack(r *relay) {
	e.mu.Lock()
	delete(e.conns, r)
	e.mu.Unlock()
	e.wg.Done()
}

// goTracked runs f as a goroutine Close waits for, unless closed.
func (e *Egress) goTracked(f func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
	return true
}

// addrOf converts a netstack address.
func addrOf(a tcpip.Address) netip.Addr {
	ip, _ := netip.AddrFromSlice(a.AsSlice())
	return ip
}

// readerDrain bounds how long Close lets the TUN's reader finish a packet
// it read before the queue was detached.
const readerDrain = 50 * time.Millisecond

// removeDevice deletes the TUN device of descriptor fd from the network
// namespace it lives in (a jail's, which its descriptor names): the
// kernel wakes every reader of it, and their reads fail from then on.
func removeDevice(fd int) error {
	ns, err := unix.IoctlRetInt(fd, unix.TUNGETDEVNETNS)
	if err != nil {
		return os.NewSyscallError("ioctl(TUNGETDEVNETNS)", err)
	}
	defer unix.Close(ns)
	h, err := netlink.NewHandleAt(vnetns.NsHandle(ns), unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.TUNGETIFF, ifr); err != nil {
		return os.NewSyscallError("ioctl(TUNGETIFF)", err)
	}
	link, err := h.LinkByName(ifr.Name())
	if err != nil {
		return err
	}
	return h.LinkDel(link)
}

// detachQueue detaches the multi-queue TUN descriptor fd from its device:
// reads then fail with EBADFD and the kernel queues nothing more for it.
func detachQueue(fd int) error {
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_DETACH_QUEUE)
	return unix.IoctlIfreq(fd, unix.TUNSETQUEUE, ifr)
}
