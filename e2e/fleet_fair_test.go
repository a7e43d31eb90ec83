package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
)

// DOS-01 on a fleet of three: key A floods node a with 50 busy loops
// that each run to their 2 s limit; a second later key B's print(1),
// queued through node b and sent as a sync eval through node c, completes
// within its timeout + 2 s, because each slot that frees anywhere in the
// fleet goes to the key running the fewest executions.
func TestFleetFairFloodDoesNotStarveOtherKey(t *testing.T) {
	needRoot(t)
	const keyA, keyB = "flood-key-a-0123456789", "benign-key-b-0123456789"
	fleet := startFleet(t, startNATSCluster(t, 3), 3, "--max-concurrency", "2", "--queue-size", "100",
		"--api-keys", "a:"+keyA+",b:"+keyB)
	ctx := context.Background()
	a := client.New(fleet[0].url, client.WithAPIKey(keyA))
	flood, err := client.TarFromMap(map[string]string{"main.py": "while True:\n    pass\n"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := a.ExecuteAsync(ctx, flood, &client.Metadata{Config: &client.ExecutionConfig{TimeoutSeconds: 2}}); err != nil {
			t.Fatalf("a's flood job %d: %v", i, err)
		}
	}
	time.Sleep(time.Second)

	const timeout = 5 * time.Second
	limit := timeout + 2*time.Second
	start := time.Now()
	print1, err := client.TarFromMap(map[string]string{"main.py": "print(1)\n"})
	if err != nil {
		t.Fatal(err)
	}
	b := client.New(fleet[1].url, client.WithAPIKey(keyB))
	id, err := b.ExecuteAsync(ctx, print1, &client.Metadata{Config: &client.ExecutionConfig{TimeoutSeconds: int(timeout.Seconds())}})
	if err != nil {
		t.Fatalf("b's async print(1) via node b: %v", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		c := client.New(fleet[2].url, client.WithAPIKey(keyB), client.WithTimeout(30*time.Second))
		r, err := c.Eval(ctx, &client.SimpleExecRequest{Code: "print(1)", Config: &client.ExecutionConfig{TimeoutSeconds: int(timeout.Seconds())}})
		took := time.Since(start)
		if err != nil || r.Status != client.StatusCompleted || r.Stdout != "1\n" {
			t.Errorf("b's sync print(1) via node c behind a's flood: %+v, %v", r, err)
			return
		}
		if took > limit {
			t.Errorf("b's sync print(1) via node c took %s behind a's flood of 50, want at most %s", took, limit)
		}
		t.Logf("b's sync print(1) via node c behind a's flood of 50: %s", took)
	})
	for {
		r, err := b.GetExecution(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Final() {
			if r.Status != client.StatusCompleted || r.Stdout != "1\n" {
				t.Fatalf("b's async print(1) ended %s, stdout %q, error %q", r.Status, r.Stdout, r.Error)
			}
			t.Logf("b's async print(1) via node b behind a's flood of 50: done within %s on node %s", time.Since(start), r.Node)
			break
		}
		if waited := time.Since(start); waited > limit {
			t.Fatalf("b's async print(1) is %s %s after it was queued behind a's flood of 50, want done within %s", r.Status, waited, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
}
