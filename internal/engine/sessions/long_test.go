package sessions

import (
	"testing"

	"github.com/pyexec/pyexec/internal/engine/run"
)

// longSessionCells crosses, with room to spare, the point where a cold
// kernel used to die (about 2,700 cells here, 4,200 under a server): its
// jail's init served the cell pipe by a descriptor number that the garbage
// collector closed, so the kernel's next fetch found no pipe and it ended.
const longSessionCells = 8000

// resourceProbe is a cell that reports the kernel's open descriptors and
// the processes its jail sees.
const resourceProbe = `import os
(len(os.listdir('/proc/self/fd')), sum(p.isdigit() for p in os.listdir('/proc')))`

// TestSessionOutlivesThousandsOfCells: a session answers cell after cell,
// thousands of them, and neither its kernel's descriptors nor its jail's
// processes grow along the way.
func TestSessionOutlivesThousandsOfCells(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		svc := newService(t, Config{}, forked)
		id := newSession(t, svc, Request{})
		before := result(cell(t, svc, id, resourceProbe))
		if before == "" {
			t.Fatal("the resource probe returned nothing")
		}
		for i := 1; i <= longSessionCells; i++ {
			r := cell(t, svc, id, "x = 1")
			if r.Status != run.StatusCompleted || r.SessionEnded {
				t.Fatalf("cell %d of %d: %s %s: %s", i, longSessionCells, r.Status, r.Reason, r.Error)
			}
		}
		if after := result(cell(t, svc, id, resourceProbe)); after != before {
			t.Errorf("(kernel fds, jail processes) went from %s to %s over %d cells", before, after, longSessionCells)
		}
		r := cell(t, svc, id, "x + 1")
		if result(r) != "2" || r.ExecutionCount != longSessionCells+3 {
			t.Errorf("the last cell: %q as cell %d, want 2 as cell %d", result(r), r.ExecutionCount, longSessionCells+3)
		}
	})
}
