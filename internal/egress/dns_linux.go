package egress

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// dnsIdle is how long a DNS flow stays open for more queries (a resolver
// asks for A and AAAA on one socket).
const dnsIdle = 5 * time.Second

// resolveTimeout bounds one upstream resolution.
const resolveTimeout = 5 * time.Second

// answerTTL is the TTL of the jail's answers.
const answerTTL = 30

// maxDNSFlows bounds the DNS flows served at once: a payload sending
// queries from endless source ports gets its extra queries dropped, not a
// goroutine each.
const maxDNSFlows = 64

// handleUDP takes each new UDP flow of the jail. DNS (port 53, to any
// address) is answered by the egress; everything else is dropped.
func (e *Egress) handleUDP(r *udp.ForwarderRequest) {
	id := r.ID()
	dst, port := addrOf(id.LocalAddress), id.LocalPort
	if port != 53 {
		e.udpRefused(dst, port)
		return
	}
	if e.dnsFlows.Add(1) > maxDNSFlows {
		e.dnsFlows.Add(-1)
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		e.dnsFlows.Add(-1)
		return
	}
	conn := gonet.NewUDPConn(&wq, ep)
	if !e.goTracked(func() {
		defer e.dnsFlows.Add(-1)
		e.serveDNS(conn)
	}) {
		e.dnsFlows.Add(-1)
		conn.Close()
	}
}

// udpRefused reports a refused UDP destination once per execution: a
// payload sending many datagrams must not flood the events.
func (e *Egress) udpRefused(dst netip.Addr, port uint16) {
	if !e.firstTime(netip.AddrPortFrom(dst, port).String()) {
		return
	}
	reason := ReasonUDP
	if dst.Is6() && !dst.Is4In6() {
		reason = ReasonIPv6
	}
	e.emit(Event{Proto: "udp", Host: dst.String(), Port: port, Verdict: VerdictDeny, Reason: reason})
}

// serveDNS answers the queries of one flow until it idles.
func (e *Egress) serveDNS(conn *gonet.UDPConn) {
	defer conn.Close()
	stop := context.AfterFunc(e.ctx, func() { conn.Close() })
	defer stop()
	buf := make([]byte, 1500)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(dnsIdle))
		n, err := conn.Read(buf)
		if err != nil {
			return
		}
		if resp := e.answer(buf[:n]); resp != nil {
			if _, err := conn.Write(resp); err != nil {
				return
			}
		}
	}
}

// answer builds the response to one query; nil drops a query that does
// not parse.
func (e *Egress) answer(query []byte) []byte {
	var p dnsmessage.Parser
	hdr, err := p.Start(query)
	if err != nil || hdr.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	resp := dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true, RecursionDesired: hdr.RecursionDesired,
		RecursionAvailable: true}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	var answerA *nameEntry
	switch {
	case hdr.OpCode != 0 || q.Class != dnsmessage.ClassINET:
		resp.RCode = dnsmessage.RCodeNotImplemented
	case checkName(name) != nil || !e.policy.NameAllowed(name, 0):
		resp.RCode = dnsmessage.RCodeNameError
		e.dnsEvent(name, VerdictDeny, ReasonNotAllowed)
	default:
		en, rcode := e.resolve(name)
		resp.RCode = rcode
		if en != nil && q.Type == dnsmessage.TypeA {
			answerA = en
		}
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), resp)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	if answerA != nil {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: answerTTL}
		if b.AResource(rh, dnsmessage.AResource{A: answerA.synth.As4()}) != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// resolve looks an allowed name up (once per execution), keeping only
// addresses the guard and the deny list let through. A name that resolves
// only to denied addresses is refused: that is DNS rebinding, or a name
// of the private network.
func (e *Egress) resolve(name string) (*nameEntry, dnsmessage.RCode) {
	if en := e.names.lookupName(name); en != nil {
		return en, dnsmessage.RCodeSuccess
	}
	if !e.names.beginLookup(name) {
		e.dnsEvent(name, VerdictError, ReasonResolveFailed)
		return nil, dnsmessage.RCodeNameError
	}
	ctx, cancel := context.WithTimeout(e.ctx, resolveTimeout)
	defer cancel()
	// The name is asked for as fully qualified: the server's search
	// domains must not turn an allowed name into one of its own network.
	addrs, err := e.cfg.Resolver.LookupNetIP(ctx, "ip4", name+".")
	if err != nil || len(addrs) == 0 {
		e.names.fail(name)
		e.dnsEvent(name, VerdictError, ReasonResolveFailed)
		return nil, dnsmessage.RCodeNameError
	}
	var keep []netip.Addr
	reason := ""
	for _, a := range addrs {
		a = a.Unmap()
		if r := e.cfg.Guard.Check(a, 0); r != "" {
			reason = ReasonPrivateAddress
			continue
		}
		if e.policy.AddrDenied(a, 0) {
			reason = ReasonNotAllowed
			continue
		}
		keep = append(keep, a)
	}
	if len(keep) == 0 {
		if reason == "" {
			reason = ReasonResolveFailed
		}
		e.names.fail(name)
		e.dnsEvent(name, VerdictDeny, reason)
		return nil, dnsmessage.RCodeNameError
	}
	en := e.names.add(name, keep)
	if en == nil {
		e.dnsEvent(name, VerdictError, ReasonResolveFailed)
		return nil, dnsmessage.RCodeServerFailure
	}
	e.dnsEvent(name, VerdictAllow, "")
	return en, dnsmessage.RCodeSuccess
}

// dnsEvent reports a lookup once per name and verdict.
func (e *Egress) dnsEvent(name, verdict, reason string) {
	if e.firstTime("dns " + verdict + " " + name) {
		e.emit(Event{Proto: "dns", Host: name, Verdict: verdict, Reason: reason})
	}
}

// firstTime reports whether key is new to this execution. Once the event
// budget is spent nothing more is remembered (the events would be dropped
// anyway), so a payload asking for endless names cannot grow the set.
func (e *Egress) firstTime(key string) bool {
	if e.events.Load() >= int64(e.cfg.Limits.MaxEvents) {
		e.dropped.Add(1)
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.udpSeen[key] {
		return false
	}
	e.udpSeen[key] = true
	return true
}
