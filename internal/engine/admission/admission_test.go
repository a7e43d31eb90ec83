package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// granted reports whether t's slot is its caller's.
func granted(t *Ticket) bool {
	select {
	case <-t.granted:
		return true
	default:
		return false
	}
}

// fakeFleet is a Counts whose counts the test sets.
type fakeFleet struct {
	run, pend map[string]int
	async     map[string]int  // queued async jobs per key
	indexed   map[string]bool // the executions whose records the counts include
}

func newFakeFleet() *fakeFleet {
	return &fakeFleet{run: map[string]int{}, pend: map[string]int{}, async: map[string]int{}, indexed: map[string]bool{}}
}

func (f *fakeFleet) Indexed(id string) bool { return f.indexed[id] }

func (f *fakeFleet) Running(key string) int { return f.run[key] }
func (f *fakeFleet) Pending(key string) int { return f.pend[key] }
func (f *fakeFleet) QueuedAsync() ([]string, int) {
	var keys []string
	total := 0
	for k, n := range f.async {
		if n > 0 {
			keys = append(keys, k)
			total += n
		}
	}
	slices.Sort(keys)
	return keys, total
}

// A key with many sync callers waiting delays another key by one slot,
// not by its whole line: freed slots go to the keys in turn.
func TestAdmissionServesKeysInTurn(t *testing.T) {
	a := newGate(1, 100, 0, 0, newFakeFleet())
	first, err := a.EnterSync("a")
	if err != nil || !granted(first) {
		t.Fatalf("first execution on an idle node: granted %v, err %v", first != nil && granted(first), err)
	}
	var flood []*Ticket
	for range 10 {
		w, err := a.EnterSync("a")
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, w)
	}
	b, err := a.EnterSync("b")
	if err != nil {
		t.Fatal(err)
	}
	first.Release()
	if !granted(flood[0]) || granted(b) {
		t.Fatalf("after the first slot frees: a's next granted %v, b granted %v; want a's turn first", granted(flood[0]), granted(b))
	}
	flood[0].Release()
	if !granted(b) || granted(flood[1]) {
		t.Fatalf("after the second slot frees: b granted %v, a's next granted %v; want b's turn", granted(b), granted(flood[1]))
	}
	b.Release()
	if !granted(flood[1]) {
		t.Fatal("a's line is not served once b's is empty")
	}
	if running, queued := a.stats(); running != 1 || queued != 8 {
		t.Errorf("stats: running %d queued %d, want 1 and 8", running, queued)
	}
}

// A key at its running limit fleet-wide waits even with slots free here,
// and other keys take them; once the fleet's count drops it runs.
func TestAdmissionRunningPerKey(t *testing.T) {
	fleet := newFakeFleet()
	a := newGate(3, 10, 1, 0, fleet)
	a1, _ := a.EnterSync("a")
	a2, err := a.EnterSync("a")
	if err != nil || !granted(a1) || granted(a2) {
		t.Fatalf("a's second execution with --max-running-per-key 1: granted %v err %v, want waiting", granted(a2), err)
	}
	b1, _ := a.EnterSync("b")
	if !granted(b1) {
		t.Fatal("b does not get a free slot while a is at its limit")
	}
	// a's execution here ends, but another node runs one of a's now.
	fleet.run["a"] = 1
	a1.Release()
	if granted(a2) {
		t.Fatal("a's waiting execution starts while a runs one on another node")
	}
	fleet.run["a"] = 0
	a.Poke()
	if !granted(a2) {
		t.Fatal("a's waiting execution does not start once a runs nothing fleet-wide")
	}
}

// Beyond a key's queued limit fleet-wide submissions are refused with a
// message naming the flag; other keys are still admitted.
func TestAdmissionQueuedPerKey(t *testing.T) {
	fleet := newFakeFleet()
	a := newGate(1, 10, 0, 2, fleet)
	if _, err := a.EnterSync("a"); err != nil {
		t.Fatal(err)
	}
	// One of a's jobs is queued by another node, one is being submitted here.
	fleet.pend["a"], fleet.async["a"] = 1, 1
	if err := a.ReserveAsync("a", "a1"); err != nil {
		t.Fatal(err)
	}
	err := a.ReserveAsync("a", "a2")
	if !errors.Is(err, ErrOverloaded) || !strings.Contains(err.Error(), "--max-queued-per-key") || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("a's third queued execution: %v, want ErrOverloaded naming the key and --max-queued-per-key", err)
	}
	if _, err := a.EnterSync("a"); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("a's sync execution over its queued limit: %v, want ErrOverloaded", err)
	}
	if err := a.ReserveAsync("b", "b1"); err != nil {
		t.Fatalf("b is refused while only a is at its limit: %v", err)
	}
	// The submission here is recorded: the fleet counts it now.
	fleet.pend["a"], fleet.async["a"], fleet.indexed["a1"] = 2, 2, true
	a.Submitted("a", "a1")
	if err := a.ReserveAsync("a", "a3"); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("a's recorded job must still count: %v", err)
	}
	// One of a's queued jobs starts somewhere: a may queue one more.
	fleet.pend["a"], fleet.async["a"] = 1, 1
	if err := a.ReserveAsync("a", "a4"); err != nil {
		t.Fatalf("a is refused after one of its queued jobs went: %v", err)
	}
}

// A submission whose record the index shows before its writer calls
// Submitted (the index's watch can be ahead of the write's answer) is
// counted once: four fit on capacity 2 + queue 2 however the two race.
func TestAdmissionCountsARecordedSubmissionOnce(t *testing.T) {
	fleet := newFakeFleet()
	a := newGate(2, 2, 0, 0, fleet)
	for i, id := range []string{"j1", "j2", "j3"} {
		if err := a.ReserveAsync("a", id); err != nil {
			t.Fatalf("submission %d: %v", i+1, err)
		}
		// Recorded pending and in the index; Submitted not called yet.
		fleet.pend["a"], fleet.async["a"], fleet.indexed[id] = i+1, i+1, true
	}
	if running, queued := a.stats(); running != 0 || queued != 3 {
		t.Errorf("stats with three recorded submissions: running %d queued %d, want 0 and 3", running, queued)
	}
	if err := a.ReserveAsync("a", "j4"); err != nil {
		t.Fatalf("the fourth submission on capacity 2 + queue 2: %v", err)
	}
	if err := a.ReserveAsync("a", "j5"); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("the fifth: %v, want ErrOverloaded", err)
	}
	for _, id := range []string{"j1", "j2", "j3", "j4"} {
		a.Submitted("a", id)
	}
	a.Submitted("a", "j4") // twice: nothing more
	if len(a.submitting) != 0 || a.keys["a"] != nil {
		t.Errorf("after every Submitted: %d submissions, key entry %+v, want none", len(a.submitting), a.keys["a"])
	}

	// The same for a key's queued limit (3 here).
	fleet = newFakeFleet()
	a = newGate(10, 10, 0, 3, fleet)
	for i, id := range []string{"k1", "k2", "k3"} {
		if err := a.ReserveAsync("a", id); err != nil {
			t.Fatalf("a's submission %d under its limit of 3: %v", i+1, err)
		}
		fleet.pend["a"], fleet.async["a"], fleet.indexed[id] = i+1, i+1, true
	}
	if err := a.ReserveAsync("a", "k4"); !errors.Is(err, ErrKeyOverloaded) {
		t.Fatalf("a's fourth over its limit of 3: %v, want ErrKeyOverloaded", err)
	}
}

// The dispatcher claims a slot only when one is free and no sync caller
// waits here; a claimed slot given back goes to a sync caller.
func TestAdmissionClaimYieldsToSyncCallers(t *testing.T) {
	fleet := newFakeFleet()
	a := newGate(1, 10, 0, 0, fleet)
	if keys, _ := a.Claim(); keys != nil {
		t.Fatalf("claimed a slot for %v with nothing queued", keys)
	}
	fleet.async["q"] = 3
	if keys, _ := a.Claim(); fmt.Sprint(keys) != "[q]" {
		t.Fatalf("claim with q's jobs queued on an idle node = %v, want [q]", keys)
	}
	s, err := a.EnterSync("s")
	if err != nil || granted(s) {
		t.Fatalf("sync caller while the only slot is claimed: granted %v err %v, want waiting", granted(s), err)
	}
	a.Unclaim()
	if !granted(s) {
		t.Fatal("the sync caller does not get the slot the dispatcher gave back")
	}
	keys, changed := a.Claim()
	if keys != nil {
		t.Fatal("claimed a slot while the only one runs a sync caller")
	}
	s.Release()
	select {
	case <-changed:
	default:
		t.Fatal("the dispatcher is not woken when a slot frees")
	}
	if keys, _ := a.Claim(); keys == nil {
		t.Fatal("no slot claimed once the sync caller is done")
	}
}

// Queued jobs go first to the key running the fewest executions
// fleet-wide, then round-robin after the key served last; keys at their
// running limit are left out.
func TestAdmissionAsyncOrder(t *testing.T) {
	fleet := newFakeFleet()
	a := newGate(4, 100, 2, 0, fleet)
	fleet.async = map[string]int{"a": 50, "b": 1, "c": 3, "d": 2}
	fleet.run = map[string]int{"a": 1, "b": 1, "c": 0, "d": 2}
	order := func() string {
		keys, _ := a.Claim()
		a.Unclaim()
		return fmt.Sprint(keys)
	}
	if got := order(); got != "[c a b]" {
		t.Errorf("order = %s, want [c a b] (fewest running first; d at its limit)", got)
	}
	a.Claim()
	a.StartAsync("a").Release()
	if got := order(); got != "[c b a]" {
		t.Errorf("order after a was served = %s, want [c b a]", got)
	}
	fleet.run["c"] = 1
	a.Claim()
	a.StartAsync("b").Release()
	if got := order(); got != "[c a b]" {
		t.Errorf("order after b was served, all running one = %s, want [c a b]", got)
	}
	if running, _ := a.stats(); running != 0 {
		t.Errorf("running after every claimed slot was released = %d, want 0", running)
	}
}

// A slot goes to the key running the fewest executions, even when
// another key's line has waited longer.
func TestAdmissionPrefersKeyRunningFewest(t *testing.T) {
	a := newGate(2, 100, 0, 0, newFakeFleet())
	r1, _ := a.EnterSync("a")
	r2, _ := a.EnterSync("a")
	var flood []*Ticket
	for range 5 {
		w, _ := a.EnterSync("a")
		flood = append(flood, w)
	}
	b, _ := a.EnterSync("b")
	r1.Release()
	if !granted(b) || granted(flood[0]) {
		t.Fatalf("a slot frees while a runs one and b none: b granted %v, a's next granted %v; want b", granted(b), granted(flood[0]))
	}
	r2.Release()
	if !granted(flood[0]) {
		t.Fatal("a's line is not served when it runs the fewest")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := flood[1].Wait(ctx); err == nil {
		t.Fatal("wait on a cancelled context succeeded")
	}
	if _, queued := a.stats(); queued != 3 {
		t.Errorf("queued after one waiter left = %d, want 3", queued)
	}
}

// A job this node took holds a slot while its record still says pending
// (until the running transition): it counts once, not as running and
// queued both, so the node refuses nothing it has room for. Seen as
// 429s right after a kill frees a slot (python tests, overload case).
func TestAdmissionCountsATakenJobOnce(t *testing.T) {
	f := newFakeFleet()
	f.async["a"] = 2
	a := newGate(2, 2, 0, 0, f)
	var taken []*Ticket
	for range 2 {
		keys, _ := a.Claim()
		if len(keys) != 1 {
			t.Fatalf("claim: %v", keys)
		}
		taken = append(taken, a.StartAsync("a"))
	}
	if keys, _ := a.Claim(); len(keys) != 0 {
		t.Fatalf("claim with every queued job taken here: %v, want none", keys)
	}
	// The index still counts both taken jobs as queued: two more fit.
	for i := range 2 {
		if err := a.ReserveAsync("b", fmt.Sprint("b", i)); err != nil {
			t.Fatalf("submission %d with two jobs taken and nothing else queued: %v", i, err)
		}
	}
	if err := a.ReserveAsync("b", "b2"); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("a fifth execution on capacity 2 + queue 2: %v, want ErrOverloaded", err)
	}
	if running, queued := a.stats(); running != 2 || queued != 2 {
		t.Errorf("stats: running %d queued %d, want 2 and 2", running, queued)
	}
	// Recorded running, the index no longer counts them as queued.
	for _, tk := range taken {
		tk.Recorded()
	}
	f.async["a"] = 0
	if running, queued := a.stats(); running != 2 || queued != 2 {
		t.Errorf("stats after the records say running: running %d queued %d, want 2 and 2", running, queued)
	}
	taken[0].Release()
	if running, _ := a.stats(); running != 1 {
		t.Errorf("stats after one ended: running %d, want 1", running)
	}
}
