package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
)

// TestRestartKeepsHistoryAndMarksLostRuns: records survive a restart, and
// an execution that was running when the server was killed with SIGKILL is
// failed/node_lost afterwards — and its processes are gone.
func TestRestartKeepsHistoryAndMarksLostRuns(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	data := t.TempDir()
	s := startServer(t, data)
	c := client.New(s.url)

	done, err := c.Eval(ctx, &client.SimpleExecRequest{Code: "print('kept')"})
	if err != nil || done.Status != client.StatusCompleted {
		t.Fatalf("eval: %v %+v", err, done)
	}
	id, err := c.ExecuteAsync(ctx, mustTar(t, map[string]string{"main.py": "import time\nprint('working', flush=True)\ntime.sleep(120)\n"}),
		&client.Metadata{Config: &client.ExecutionConfig{TimeoutSeconds: 300}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the async run to start", func() bool {
		r, err := c.GetExecution(ctx, id)
		return err == nil && r.Status == client.StatusRunning
	})
	s.crash()
	eventually(t, 10*time.Second, "the crashed server's jail to die with it", func() bool { return len(jailProcesses("")) == 0 })

	s = startServer(t, data)
	c = client.New(s.url)
	kept, err := c.GetExecution(ctx, done.ExecutionID)
	if err != nil || kept.Status != client.StatusCompleted || kept.Stdout != "kept\n" {
		t.Fatalf("record after restart: %v %+v", err, kept)
	}
	lost, err := c.GetExecution(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if lost.Status != client.StatusFailed || lost.Reason != client.ReasonNodeLost || lost.Error == "" {
		t.Fatalf("in-flight run after restart: status %s reason %q error %q", lost.Status, lost.Reason, lost.Error)
	}
}

func mustTar(t *testing.T, files map[string]string) []byte {
	t.Helper()
	b, err := client.TarFromMap(files)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
