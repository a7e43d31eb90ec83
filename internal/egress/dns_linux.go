package egress

import (
	"bytes"
	"context"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// dnsLinger is how long a DNS flow waits, once it answered, for another
// query on the same socket: a resolver asks for A and AAAA on one socket,
// the second sometimes a moment after the first is answered.
const dnsLinger = 200 * time.Millisecond

// resolveTimeout bounds one upstream resolution.
const resolveTimeout = 5 * time.Second

// answerTTL is the TTL of the jail's answers.
const answerTTL = 30

// maxDNSFlows bounds the lookups being answered at once (a flow counts
// until its first answer is sent, and while it answers each later query
// on its socket): a payload sending queries from endless source ports, or
// again on flows that answered, gets SERVFAIL for the extra ones, not a
// goroutine waiting for the upstream resolver each.
const maxDNSFlows = 64

// maxDNSLingering bounds the flows waiting after their answer (dnsLinger);
// over it a flow ends once it answered what it holds and what arrives
// within dnsDrainGrace.
const maxDNSLingering = 256

// handleUDP takes each new UDP flow of the jail. DNS (port 53, to any
// address) is answered by the egress; everything else is dropped.
func (e *Egress) handleUDP(r *udp.ForwarderRequest) {
	id := r.ID()
	dst, port := addrOf(id.LocalAddress), id.LocalPort
	if port != 53 {
		e.udpRefused(dst, port)
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		return
	}
	if e.dnsBusy.Add(1) > maxDNSFlows {
		e.dnsBusy.Add(-1)
		e.refuseDNS(ep, dst)
		return
	}
	conn := gonet.NewUDPConn(&wq, ep)
	if !e.goTracked(func() { e.serveDNS(conn, dst) }) {
		e.dnsBusy.Add(-1)
		conn.Close()
	}
}

// udpRefused reports a refused UDP destination once per execution: a
// payload sending many datagrams must not flood the events.
func (e *Egress) udpRefused(dst netip.Addr, port uint16) {
	if !e.firstTime(netip.AddrPortFrom(dst, port).String(), &e.kept) {
		return
	}
	reason := ReasonUDP
	if dst.Is6() && !dst.Is4In6() {
		reason = ReasonIPv6
	}
	e.emit(Event{Proto: "udp", Host: dst.String(), Port: port, Verdict: VerdictDeny, Reason: reason})
}

// serveDNS answers the query that opened a flow (to dst), then those the
// payload sends on the same socket until the flow has been idle for
// dnsLinger. The flow counts as a lookup in flight until its first answer
// (handleUDP counted it), and again while it answers each later query.
func (e *Egress) serveDNS(conn *gonet.UDPConn, dst netip.Addr) {
	defer conn.Close()
	stop := context.AfterFunc(e.ctx, func() { conn.Close() })
	defer stop()
	buf := make([]byte, 1500)
	// The first query is queued already: the deadline only ends a flow
	// that lingered in vain.
	_ = conn.SetReadDeadline(time.Now().Add(dnsLinger))
	n, err := conn.Read(buf)
	var resp []byte
	if err == nil {
		resp = e.answer(buf[:n])
	}
	e.dnsBusy.Add(-1)
	if err != nil || resp != nil && write(conn, resp) != nil {
		return
	}
	if e.dnsLingering.Add(1) > maxDNSLingering {
		e.dnsLingering.Add(-1)
		e.drainDNS(conn, buf, dst)
		return
	}
	defer e.dnsLingering.Add(-1)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(dnsLinger))
		n, err := conn.Read(buf)
		if err != nil {
			return
		}
		if resp := e.answerAgain(buf[:n], dst); resp != nil && write(conn, resp) != nil {
			return
		}
	}
}

// write sends one answer.
func write(conn *gonet.UDPConn, resp []byte) error {
	_, err := conn.Write(resp)
	return err
}

// answerAgain answers a later query of a flow: it counts as a lookup in
// flight while it is answered, and over the cap gets SERVFAIL.
func (e *Egress) answerAgain(query []byte, dst netip.Addr) []byte {
	if e.dnsBusy.Add(1) > maxDNSFlows {
		e.dnsBusy.Add(-1)
		return e.refusal(query, dst)
	}
	defer e.dnsBusy.Add(-1)
	return e.answer(query)
}

// dnsDrainGrace is how long a flow that may not linger waits for a query
// still on its way: a resolver sends A and AAAA back to back from one
// socket, and a flow closed between the two loses the second (its
// resolver then waits seconds to ask again).
const dnsDrainGrace = 20 * time.Millisecond

// drainDNS answers the queries of a flow that may not linger: those
// queued and those that arrive within dnsDrainGrace of the last.
func (e *Egress) drainDNS(conn *gonet.UDPConn, buf []byte, dst netip.Addr) {
	for {
		_ = conn.SetReadDeadline(time.Now().Add(dnsDrainGrace))
		n, err := conn.Read(buf)
		if err != nil {
			return
		}
		if resp := e.answerAgain(buf[:n], dst); resp != nil && write(conn, resp) != nil {
			return
		}
	}
}

// refuseDNS answers the query of a flow over maxDNSFlows with SERVFAIL,
// so that the payload's resolver gives up at once instead of waiting, and
// reports it. It runs on the stack's own goroutine: it never blocks.
func (e *Egress) refuseDNS(ep tcpip.Endpoint, dst netip.Addr) {
	defer ep.Close()
	buf := make([]byte, 1500)
	n, ok := readQueued(ep, buf)
	if !ok {
		return
	}
	if resp := e.refusal(buf[:n], dst); resp != nil {
		_, _ = ep.Write(bytes.NewReader(resp), tcpip.WriteOptions{})
	}
}

// refusal reports a query over maxDNSFlows (to dst) and returns its
// SERVFAIL answer, nil when it does not parse.
func (e *Egress) refusal(query []byte, dst netip.Addr) []byte {
	hdr, q, ok := parseQuery(query)
	if !ok {
		e.dnsEvent(dst.String(), VerdictDeny, ReasonDNSFlowLimit)
		return nil
	}
	e.dnsEvent(queryName(q), VerdictDeny, ReasonDNSFlowLimit)
	return reply(hdr, q, dnsmessage.RCodeServerFailure, nil)
}

// readQueued reads a datagram already queued on ep, without waiting.
func readQueued(ep tcpip.Endpoint, buf []byte) (int, bool) {
	w := tcpip.SliceWriter(buf)
	res, err := ep.Read(&w, tcpip.ReadOptions{})
	if err != nil {
		return 0, false
	}
	return res.Count, true
}

// parseQuery reads a query's header and its first question.
func parseQuery(query []byte) (dnsmessage.Header, dnsmessage.Question, bool) {
	var p dnsmessage.Parser
	hdr, err := p.Start(query)
	if err != nil || hdr.Response {
		return hdr, dnsmessage.Question{}, false
	}
	q, err := p.Question()
	return hdr, q, err == nil
}

// queryName is the name a question asks for, lower case, without the
// trailing dot.
func queryName(q dnsmessage.Question) string {
	return strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
}

// answer builds the response to one query; nil drops a query that does
// not parse.
func (e *Egress) answer(query []byte) []byte {
	hdr, q, ok := parseQuery(query)
	if !ok {
		return nil
	}
	name := queryName(q)
	var rcode dnsmessage.RCode
	var answerA *nameEntry
	switch {
	case hdr.OpCode != 0 || q.Class != dnsmessage.ClassINET:
		rcode = dnsmessage.RCodeNotImplemented
	case e.placeholderLookup(name):
		rcode = dnsmessage.RCodeNameError
	case checkName(name) != nil || !e.policy.NameAllowed(name, 0):
		rcode = dnsmessage.RCodeNameError
		e.dnsEvent(name, VerdictDeny, ReasonNotAllowed)
	default:
		var en *nameEntry
		en, rcode = e.resolve(name)
		if en != nil && q.Type == dnsmessage.TypeA {
			answerA = en
		}
	}
	return reply(hdr, q, rcode, answerA)
}

// placeholderLookup reports whether name holds one of the execution's
// placeholders: such a lookup is refused (NXDOMAIN, never asked upstream,
// whatever the rules say) and reported once per secret and name; once
// the budget of lookups is spent, at each lookup (it is never dropped).
func (e *Egress) placeholderLookup(name string) bool {
	found := placeholdersIn([]byte(name), e.grant.Secrets)
	for _, s := range found {
		spent := e.lookups.Load() >= int64(e.cfg.Limits.MaxEvents)
		if spent || e.firstTime("dns placeholder "+s.Name+" "+name, &e.lookups) {
			e.emit(Event{Proto: "dns", Host: name, Verdict: VerdictDeny, Reason: ReasonPlaceholderInDNS, Secret: s.Name})
		}
	}
	return len(found) > 0
}

// reply builds a response to the query hdr and q: rcode, with en's
// synthetic address as the answer when en is not nil.
func reply(hdr dnsmessage.Header, q dnsmessage.Question, rcode dnsmessage.RCode, en *nameEntry) []byte {
	resp := dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true, RecursionDesired: hdr.RecursionDesired,
		RecursionAvailable: true, RCode: rcode}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), resp)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	if en != nil {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: answerTTL}
		if b.AResource(rh, dnsmessage.AResource{A: en.synth.As4()}) != nil {
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

// dnsEvent reports a lookup once per name, verdict and reason.
func (e *Egress) dnsEvent(name, verdict, reason string) {
	if e.firstTime("dns "+verdict+" "+reason+" "+name, &e.lookups) {
		e.emit(Event{Proto: "dns", Host: name, Verdict: verdict, Reason: reason})
	}
}

// firstTime reports whether key is new to this execution. Once budget
// (the count of the events key is for) is spent nothing more is remembered (the events would be dropped
// anyway), so a payload asking for endless names cannot grow the set.
func (e *Egress) firstTime(key string, budget *atomic.Int64) bool {
	if budget.Load() >= int64(e.cfg.Limits.MaxEvents) {
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
