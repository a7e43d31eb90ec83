package egress

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// dnsWire is an egress served over an in-memory link: the test sends the
// jail's datagrams itself and reads the answers (no TUN, no jail).
type dnsWire struct {
	e    *Egress
	link *channel.Endpoint
}

func newDNSWire(t *testing.T, res Resolver, hooks Hooks) *dnsWire {
	t.Helper()
	rules, err := ParseRules([]string{"ok.test", "*.ok.test"})
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{Policy: Policy{Allow: rules}, Guard: &Guard{}, Resolver: res}, Grant{Policy: Policy{Allow: rules}}, hooks)
	link := channel.New(1024, 1500, "")
	e.mu.Lock()
	err = e.serveLink(link)
	e.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return &dnsWire{e: e, link: link}
}

// send sends a query of type typ for ok.test from the jail's source port.
func (w *dnsWire) send(t *testing.T, port uint16, id uint16, typ dnsmessage.Type) {
	t.Helper()
	w.ask(t, port, id, "ok.test.", typ)
}

// ask sends a query of type typ for name from the jail's source port.
func (w *dnsWire) ask(t *testing.T, port uint16, id uint16, name string, typ dnsmessage.Type) {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET})
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	pkt := make([]byte, header.IPv4MinimumSize+header.UDPMinimumSize+len(q))
	ip := header.IPv4(pkt)
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(pkt)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4([4]byte{198, 18, 0, 2}), DstAddr: tcpip.AddrFrom4([4]byte{198, 18, 0, 1})})
	ip.SetChecksum(^ip.CalculateChecksum())
	header.UDP(pkt[header.IPv4MinimumSize:]).Encode(&header.UDPFields{SrcPort: port, DstPort: 53,
		Length: uint16(header.UDPMinimumSize + len(q))})
	copy(pkt[header.IPv4MinimumSize+header.UDPMinimumSize:], q)
	w.link.InjectInbound(ipv4.ProtocolNumber, stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(pkt)}))
}

// answer is one answer the jail received.
type answer struct {
	port  uint16 // the jail's port it went to
	id    uint16
	rcode dnsmessage.RCode
}

// recv waits up to d for the next answer; ok is false when none came.
func (w *dnsWire) recv(t *testing.T, d time.Duration) (answer, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	pkt := w.link.ReadContext(ctx)
	if pkt == nil {
		return answer{}, false
	}
	defer pkt.DecRef()
	b := pkt.ToView().AsSlice()
	ip := header.IPv4(b)
	udp := header.UDP(b[ip.HeaderLength():])
	var p dnsmessage.Parser
	h, err := p.Start(udp.Payload())
	if err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	return answer{port: udp.DestinationPort(), id: h.ID, rcode: h.RCode}, true
}

// TestSequentialFlows: lookups one after another, each from a port of its
// own and asking for A and AAAA at once as a resolver does, all answer —
// many more of them than the cap on flows — and a flow no longer counts
// once it answered.
func TestSequentialFlows(t *testing.T) {
	w := newDNSWire(t, StaticResolver{"ok.test": {netip.MustParseAddr("203.0.113.2")}}, Hooks{})
	const lookups = 1000
	for i := range uint16(lookups) {
		port := 20000 + i
		w.send(t, port, 2*i, dnsmessage.TypeA)
		w.send(t, port, 2*i+1, dnsmessage.TypeAAAA)
		for range 2 {
			a, ok := w.recv(t, 2*time.Second)
			if !ok || a.port != port || a.rcode != dnsmessage.RCodeSuccess {
				t.Fatalf("lookup %d: answer %+v (received: %v)", i, a, ok)
			}
		}
	}
	if n := w.e.dnsBusy.Load(); n != 0 {
		t.Errorf("%d flows still counted as answering", n)
	}
	if n := w.e.dnsLingering.Load(); n > maxDNSLingering {
		t.Errorf("%d flows lingering, more than %d", n, maxDNSLingering)
	}
}

// heldResolver answers once released, and for the name free (rooted) at
// once.
type heldResolver struct {
	StaticResolver
	release chan struct{}
	free    string
}

func (h heldResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if host != h.free {
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.StaticResolver.LookupNetIP(ctx, network, host)
}

// TestFlowCap: while maxDNSFlows lookups wait for the upstream resolver,
// more are answered at once with SERVFAIL and reported; the waiting ones
// are answered once it answers.
func TestFlowCap(t *testing.T) {
	rec := &recorder{}
	res := heldResolver{StaticResolver{"ok.test": {netip.MustParseAddr("203.0.113.2")}}, make(chan struct{}), ""}
	w := newDNSWire(t, res, rec.hooks())
	const extra = 5
	for i := range uint16(maxDNSFlows + extra) {
		w.send(t, 30000+i, i, dnsmessage.TypeA)
	}
	for range extra {
		a, ok := w.recv(t, 2*time.Second)
		if !ok || a.rcode != dnsmessage.RCodeServerFailure || a.port < 30000+maxDNSFlows {
			t.Fatalf("over the cap: %+v (received: %v), want SERVFAIL to a port past the first %d", a, ok, maxDNSFlows)
		}
	}
	if a, ok := w.recv(t, 100*time.Millisecond); ok {
		t.Fatalf("answered %+v before the resolver did", a)
	}
	close(res.release)
	for range maxDNSFlows {
		if a, ok := w.recv(t, 5*time.Second); !ok || a.rcode != dnsmessage.RCodeSuccess {
			t.Fatalf("a waiting lookup: %+v (received: %v)", a, ok)
		}
	}
	_ = w.e.Close()
	if !rec.find("dns", "ok.test", VerdictDeny, ReasonDNSFlowLimit) {
		t.Errorf("no event for the refused lookups: %+v", rec.events)
	}
}

// TestLingeringFlowsCount: a flow that answered and waits for another
// query counts as a lookup in flight again while it answers one, so that
// flows asking again cannot hold more than maxDNSFlows lookups at once
// (each a goroutine waiting for the upstream resolver): past them, a new
// flow gets SERVFAIL.
func TestLingeringFlowsCount(t *testing.T) {
	rec := &recorder{}
	res := heldResolver{StaticResolver{"ok.test": {netip.MustParseAddr("203.0.113.2")}}, make(chan struct{}), "ok.test."}
	w := newDNSWire(t, res, rec.hooks())
	for i := range uint16(maxDNSFlows) {
		w.send(t, 40000+i, i, dnsmessage.TypeA)
	}
	for range maxDNSFlows {
		if a, ok := w.recv(t, 2*time.Second); !ok || a.rcode != dnsmessage.RCodeSuccess {
			t.Fatalf("a first lookup: %+v (received: %v)", a, ok)
		}
	}
	// Each flow, lingering, asks for a name the resolver holds.
	for i := range uint16(maxDNSFlows) {
		w.ask(t, 40000+i, 1000+i, fmt.Sprintf("h%d.ok.test.", i), dnsmessage.TypeA)
	}
	for deadline := time.Now().Add(5 * time.Second); w.e.dnsBusy.Load() < maxDNSFlows; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d lookups counted in flight, want %d", w.e.dnsBusy.Load(), maxDNSFlows)
		}
	}
	const extra = 5
	for i := range uint16(extra) {
		w.send(t, 41000+i, 2000+i, dnsmessage.TypeA)
	}
	for range extra {
		a, ok := w.recv(t, 2*time.Second)
		if !ok || a.rcode != dnsmessage.RCodeServerFailure || a.port < 41000 {
			t.Fatalf("past %d lookups in flight: %+v (received: %v), want SERVFAIL to a new flow", maxDNSFlows, a, ok)
		}
	}
	close(res.release)
	for range maxDNSFlows {
		if a, ok := w.recv(t, 5*time.Second); !ok || a.port >= 41000 {
			t.Fatalf("a held lookup: %+v (received: %v)", a, ok)
		}
	}
	if !rec.find("dns", "ok.test", VerdictDeny, ReasonDNSFlowLimit) {
		t.Errorf("no event for the refused lookups: %+v", rec.events)
	}
}
