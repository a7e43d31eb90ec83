package sessions

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/snapshot"
)

// throughHeader is n as a session's hibernation header gives it back:
// written as JSON and read again.
func throughHeader(t *testing.T, n *snapshot.NetworkUsed) *snapshot.NetworkUsed {
	t.Helper()
	b, err := json.Marshal(snapshot.Session{NetworkUsed: n})
	if err != nil {
		t.Fatal(err)
	}
	var s snapshot.Session
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s.NetworkUsed
}

// TestPendingEventsSurviveAdoption: the network events a session had not
// handed to a cell's result when it hibernated come back when it is
// adopted, for its next cell's result, bounded as a live session's are;
// a header written before events were carried loads with its totals and
// none.
func TestPendingEventsSurviveAdoption(t *testing.T) {
	lookup := egress.Event{Proto: "dns", Host: "allowed.test", Verdict: egress.VerdictAllow}
	refused := egress.Event{Proto: "tcp", Host: "192.0.2.99", Port: 80, Verdict: egress.VerdictDeny,
		Reason: egress.ReasonNotAllowed}

	t.Run("pending at hibernation", func(t *testing.T) {
		var u netUse
		u.spent(egress.Stats{BytesOut: 10, BytesIn: 20})
		u.add(lookup)
		u.take() // a cell's result had it
		u.add(refused)
		back := restored(throughHeader(t, u.carried(egress.Stats{BytesIn: 5})))
		if got := back.take(); !slices.Equal(got, []egress.Event{refused}) {
			t.Errorf("the adopted session's next cell gets %+v, want the refusal pending at hibernation", got)
		}
		if got := back.totals(); got.BytesOut != 10 || got.BytesIn != 25 {
			t.Errorf("the adopted session's totals: %+v, want 10 out and 25 in", got)
		}
		if got := u.take(); !slices.Equal(got, []egress.Event{refused}) {
			t.Errorf("the session saved keeps %+v pending, want the refusal (it may go on here)", got)
		}
	})

	t.Run("header from before events were carried", func(t *testing.T) {
		var n snapshot.Session
		if err := json.Unmarshal([]byte(`{"python_version":"3.11","network":true,`+
			`"network_used":{"bytes_out":7,"bytes_in":3,"limit":"bytes_in"}}`), &n); err != nil {
			t.Fatal(err)
		}
		back := restored(n.NetworkUsed)
		if got := back.totals(); got.BytesOut != 7 || got.BytesIn != 3 || back.limited() != "bytes_in" {
			t.Errorf("totals %+v, limit %q; want 7 out, 3 in, bytes_in", got, back.limited())
		}
		if got := back.take(); len(got) != 0 {
			t.Errorf("events %+v, want none", got)
		}
	})

	t.Run("bounded as live", func(t *testing.T) {
		var u netUse
		for range maxPendingEvents + 5 {
			u.add(refused)
		}
		carried := throughHeader(t, u.carried(egress.Stats{}))
		if len(carried.Events) != maxPendingEvents {
			t.Errorf("the header carries %d events, want %d", len(carried.Events), maxPendingEvents)
		}
		carried.Events = append(carried.Events, refused)
		if got := restored(carried).take(); len(got) != maxPendingEvents {
			t.Errorf("%d events come back from a header of %d, want %d", len(got), len(carried.Events), maxPendingEvents)
		}
	})

	t.Run("long paths within the header's room", func(t *testing.T) {
		var u netUse
		long := egress.Event{Proto: "http", Host: "allowed.test", Port: 80, Verdict: egress.VerdictAllow, Method: "GET",
			Path: "/" + strings.Repeat("<", 255), Status: 200} // each '<' escaped as \u003c
		for range maxPendingEvents {
			u.add(long)
		}
		carried := u.carried(egress.Stats{})
		b, err := json.Marshal(carried.Events)
		if err != nil || len(b) > maxCarriedEventBytes || len(carried.Events) < maxPendingEvents/10 {
			t.Errorf("the header carries %d events in %d bytes (%v), want as many as fit %d bytes",
				len(carried.Events), len(b), err, maxCarriedEventBytes)
		}
		if got := u.take(); len(got) != maxPendingEvents {
			t.Errorf("the session saved keeps %d events, want %d", len(got), maxPendingEvents)
		}
	})
}
