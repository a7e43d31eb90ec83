package pool

import (
	"context"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// capped is a pool at a cap of max warm jails holding kinds, none of
// which runs anything: what needs decides is all that is looked at.
func capped(max int, kinds ...*kind) *Pool {
	p := &Pool{cfg: Config{MaxWarm: max}, ctx: context.Background(), kinds: map[string]*kind{}}
	for _, k := range kinds {
		p.kinds[k.key] = k
		p.warm += len(k.ready) + k.building
	}
	return p
}

func readyJails(n int) []*warmJail {
	w := make([]*warmJail, n)
	for i := range w {
		w[i] = &warmJail{}
	}
	return w
}

// TestAKindShortOfItsSpareTakesAPlaceAtTheCap pins the rule of needs at
// the cap: a place moves from the kind holding the most to a kind short
// of what it wants only while the first holds two more and keeps one
// ready, one trade at a time, never for a kind whose builds fail, and the
// count of warm jails stays at the cap.
func TestAKindShortOfItsSpareTakesAPlaceAtTheCap(t *testing.T) {
	a := &kind{key: "a", want: 4, ready: readyJails(3)}
	b := &kind{key: "b", want: 2}
	p := capped(3, a, b)
	newest := a.ready[2]

	ok, given := p.needs(b)
	if !ok || given != newest || len(a.ready) != 2 || b.building != 1 || p.warm != 3 {
		t.Fatalf("needs(b) = %v, given the newest of a: %v; a ready %d, b building %d, warm %d; want true, true, 2, 1, 3",
			ok, given == newest, len(a.ready), b.building, p.warm)
	}
	if ok, given := p.needs(b); ok || given != nil {
		t.Fatal("a second trade while b's first is still building")
	}
	// b's build is done: it holds 1, a holds 2 — one more, not two.
	b.building, b.ready = 0, readyJails(1)
	if ok, given := p.needs(b); ok || given != nil || len(a.ready) != 2 {
		t.Fatalf("a took a place from a kind holding only one more (a ready %d)", len(a.ready))
	}
	// Nor does a take it back: b holds 1, a 2.
	if ok, given := p.needs(a); ok || given != nil || len(b.ready) != 1 {
		t.Fatal("the place moved back")
	}

	// A kind whose last build failed takes nothing.
	c := &kind{key: "c", want: 2, failing: true}
	d := &kind{key: "d", want: 4, ready: readyJails(3)}
	if ok, _ := capped(3, c, d).needs(c); ok || len(d.ready) != 3 {
		t.Fatal("a failing kind took a place")
	}

	// A kind with one ready (the rest building) keeps it.
	e := &kind{key: "e", want: 4, ready: readyJails(1), building: 2}
	f := &kind{key: "f", want: 2}
	if ok, _ := capped(3, e, f).needs(f); ok || len(e.ready) != 1 {
		t.Fatal("a kind's only ready jail was taken")
	}

	// Between kinds holding as many, the one without network gives.
	g := &kind{key: "g", want: 4, ready: readyJails(2), spec: sandbox.Spec{Network: true}}
	h := &kind{key: "h", want: 4, ready: readyJails(2)}
	i := &kind{key: "i", want: 2}
	if ok, _ := capped(4, g, h, i).needs(i); !ok || len(h.ready) != 1 || len(g.ready) != 2 {
		t.Fatalf("ready after the trade: network kind %d, other %d; want 2, 1", len(g.ready), len(h.ready))
	}

	// Under the cap nothing is taken.
	j := &kind{key: "j", want: 4, ready: readyJails(2)}
	k := &kind{key: "k", want: 2}
	if ok, given := capped(3, j, k).needs(k); !ok || given != nil || len(j.ready) != 2 {
		t.Fatal("a place was taken under the cap")
	}
}
