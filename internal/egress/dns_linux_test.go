package egress

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// countingResolver answers every name under ok.test with one address and
// records what it was asked.
type countingResolver struct {
	mu    sync.Mutex
	asked []string
	next  byte
}

func (c *countingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, host)
	if host == "gone.ok.test." {
		return nil, ErrNoSuchHost
	}
	c.next++ // a new address each time: a second resolution must not replace the first
	return []netip.Addr{netip.AddrFrom4([4]byte{203, 0, 113, c.next})}, nil
}

func (c *countingResolver) count(host string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, h := range c.asked {
		if h == host {
			n++
		}
	}
	return n
}

// query asks e's DNS for the A record of name and returns the answer's
// RCode.
func query(t *testing.T, e *Egress, name string) dnsmessage.RCode {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		t.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var p dnsmessage.Parser
	h, err := p.Start(e.answer(q))
	if err != nil {
		t.Fatal(err)
	}
	return h.RCode
}

// wildcardEgress is an egress allowing *.ok.test, resolving with res and
// reporting to hooks.
func wildcardEgress(t *testing.T, res Resolver, hooks Hooks) *Egress {
	t.Helper()
	rules, err := ParseRules([]string{"*.ok.test"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{Policy: Policy{Allow: rules}, Guard: g, Resolver: res}, Grant{Policy: Policy{Allow: rules}}, hooks)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// TestResolveUpstream: names are asked for fully qualified, a failed one
// is not asked for again, and one execution's upstream lookups are
// bounded.
func TestResolveUpstream(t *testing.T) {
	res := &countingResolver{}
	e := wildcardEgress(t, res, Hooks{})
	if rc := query(t, e, "a.ok.test"); rc != dnsmessage.RCodeSuccess {
		t.Fatalf("a.ok.test: %v", rc)
	}
	if res.count("a.ok.test.") != 1 {
		t.Errorf("the resolver was asked %q, want the rooted name a.ok.test.", res.asked)
	}
	for range 3 {
		if rc := query(t, e, "gone.ok.test"); rc != dnsmessage.RCodeNameError {
			t.Errorf("gone.ok.test: %v, want NXDOMAIN", rc)
		}
	}
	if n := res.count("gone.ok.test."); n != 1 {
		t.Errorf("a name that failed was asked for %d times, want once", n)
	}
	for i := range maxLookups + 10 {
		query(t, e, "n"+strconv.Itoa(i)+".ok.test")
	}
	if n := len(res.asked); n != maxLookups {
		t.Errorf("%d upstream lookups, want at most %d", n, maxLookups)
	}
	if rc := query(t, e, "a.ok.test"); rc != dnsmessage.RCodeSuccess {
		t.Errorf("a name resolved before the budget was spent: %v", rc)
	}
}

// TestNameResolvedTwice: two flows resolving a name at once (run with
// -race) leave it the addresses of the first resolution, read safely by
// the connections being decided meanwhile.
func TestNameResolvedTwice(t *testing.T) {
	res := &countingResolver{}
	e := wildcardEgress(t, res, Hooks{})
	first := e.names.add("a.ok.test", []netip.Addr{netip.MustParseAddr("203.0.113.200")})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { e.names.add("a.ok.test", []netip.Addr{netip.MustParseAddr("203.0.113.201")}) })
		wg.Go(func() {
			tg, ev := e.decide(first.synth, 80)
			if ev.Verdict != VerdictAllow || len(tg.addrs) != 1 || tg.addrs[0] != netip.MustParseAddr("203.0.113.200") {
				t.Errorf("decided %+v %+v, want the first resolution's address", tg, ev)
			}
		})
	}
	wg.Wait()
}

// TestSyncDeliversWhatWasAnswered: once a lookup is answered, Sync
// returns only when the hook has its event (a session's cell result
// carries the lookups its code saw refused), or when its context ends.
func TestSyncDeliversWhatWasAnswered(t *testing.T) {
	var mu sync.Mutex
	var got []Event
	e := wildcardEgress(t, &countingResolver{}, Hooks{Event: func(ev Event) {
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}})
	for _, name := range []string{"a.other.test", "b.other.test"} {
		if rc := query(t, e, name); rc != dnsmessage.RCodeNameError {
			t.Fatalf("%s: %v, want NXDOMAIN", name, rc)
		}
	}
	if !e.Sync(context.Background()) {
		t.Fatal("Sync gave up without a deadline")
	}
	mu.Lock()
	had := slices.Clone(got)
	mu.Unlock()
	for i, name := range []string{"a.other.test", "b.other.test"} {
		if len(had) != 2 || had[i].Host != name || had[i].Verdict != VerdictDeny || had[i].Reason != ReasonNotAllowed {
			t.Fatalf("after Sync the hook had %+v, want both refused lookups", had)
		}
	}

	// A hook slower than the caller's deadline: Sync gives up then, and
	// the event still reaches the hook.
	query(t, e, "c.other.test")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if e.Sync(ctx) {
		t.Error("Sync said every event was delivered before a 30 ms hook could return")
	}
	if !e.Sync(context.Background()) {
		t.Fatal("Sync gave up without a deadline")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[2].Host != "c.other.test" {
		t.Errorf("the hook had %+v, want the third lookup last", got)
	}
}
