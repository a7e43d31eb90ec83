package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// granted reports whether t's slot is its caller's.
func granted(t *ticket) bool {
	select {
	case <-t.granted:
		return true
	default:
		return false
	}
}

// A key with many executions waiting delays another key by one slot, not
// by its whole line: freed slots go to the keys in turn.
func TestAdmissionServesKeysInTurn(t *testing.T) {
	a := newAdmission(1, 100, 0, 0)
	first, err := a.enterSync("a")
	if err != nil || !granted(first) {
		t.Fatalf("first execution on an idle node: granted %v, err %v", first != nil && granted(first), err)
	}
	var flood []*ticket
	for range 10 {
		flood = append(flood, a.holdAsync("a"))
	}
	b, err := a.enterSync("b")
	if err != nil {
		t.Fatal(err)
	}
	first.release()
	if !granted(flood[0]) || granted(b) {
		t.Fatalf("after the first slot frees: a's next granted %v, b granted %v; want a's turn first", granted(flood[0]), granted(b))
	}
	flood[0].release()
	if !granted(b) || granted(flood[1]) {
		t.Fatalf("after the second slot frees: b granted %v, a's next granted %v; want b's turn", granted(b), granted(flood[1]))
	}
	b.release()
	if !granted(flood[1]) {
		t.Fatal("a's line is not served once b's is empty")
	}
	if running, queued := a.stats(); running != 1 || queued != 8 {
		t.Errorf("stats: running %d queued %d, want 1 and 8", running, queued)
	}
}

// A key at its running limit waits even with slots free, and other keys
// take them.
func TestAdmissionRunningPerKey(t *testing.T) {
	a := newAdmission(3, 10, 1, 0)
	a1, _ := a.enterSync("a")
	a2, err := a.enterSync("a")
	if err != nil || !granted(a1) || granted(a2) {
		t.Fatalf("a's second execution with --max-running-per-key 1: granted %v err %v, want waiting", granted(a2), err)
	}
	b1, _ := a.enterSync("b")
	if !granted(b1) {
		t.Fatal("b does not get a free slot while a is at its limit")
	}
	a1.release()
	if !granted(a2) {
		t.Fatal("a's waiting execution does not start once its running one ends")
	}
}

// Beyond a key's queued limit submissions are refused with a message
// naming the flag; other keys are still admitted.
func TestAdmissionQueuedPerKey(t *testing.T) {
	a := newAdmission(1, 10, 0, 2)
	if _, err := a.enterSync("a"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := a.reserveAsync("a"); err != nil {
			t.Fatal(err)
		}
	}
	err := a.reserveAsync("a")
	if !errors.Is(err, ErrOverloaded) || !strings.Contains(err.Error(), "--max-queued-per-key") || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("a's third queued execution: %v, want ErrOverloaded naming the key and --max-queued-per-key", err)
	}
	if _, err := a.enterSync("a"); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("a's sync execution over its queued limit: %v, want ErrOverloaded", err)
	}
	if err := a.reserveAsync("b"); err != nil {
		t.Fatalf("b is refused while only a is at its limit: %v", err)
	}
	// Once a held job of a starts, a may queue one more.
	h := a.holdAsync("a")
	if err := a.reserveAsync("a"); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("holding a job must not free a's queued place: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.wait(ctx); err == nil {
		t.Fatal("wait on a cancelled context succeeded")
	}
	if err := a.reserveAsync("a"); err != nil {
		t.Fatalf("a is refused after one of its queued jobs went: %v", err)
	}
}

// A slot goes to the key running the fewest executions, even when
// another key's line has waited longer.
func TestAdmissionPrefersKeyRunningFewest(t *testing.T) {
	a := newAdmission(2, 100, 0, 0)
	r1, _ := a.enterSync("a")
	r2, _ := a.enterSync("a")
	var flood []*ticket
	for range 5 {
		flood = append(flood, a.holdAsync("a"))
	}
	b := a.holdAsync("b")
	r1.release()
	if !granted(b) || granted(flood[0]) {
		t.Fatalf("a slot frees while a runs one and b none: b granted %v, a's next granted %v; want b", granted(b), granted(flood[0]))
	}
	r2.release()
	if !granted(flood[0]) {
		t.Fatal("a's line is not served when it runs the fewest")
	}
}
