package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/client"
)

// TestFleetWorkspace: a run on node a writes files into a workspace; a
// later run on node c reads them byte for byte; a session created through
// c sees them, and what it writes is there for the next run, on b, once
// it ends. The workspace's data crosses the nodes through the fleet's
// store only (each node has its own data directory).
func TestFleetWorkspace(t *testing.T) {
	fleetInParallel(t)
	fleet := startFleet(t, startNATSCluster(t, 3), 3)
	a, b, c := client.New(fleet[0].url), client.New(fleet[1].url), client.New(fleet[2].url)
	ctx := context.Background()
	if _, err := a.CreateWorkspace(ctx, "shared", 0); err != nil {
		t.Fatalf("create via a: %v", err)
	}
	run := func(cl *client.Client, node, code string) *client.ExecutionResult {
		t.Helper()
		res, err := cl.Eval(ctx, &client.SimpleExecRequest{Code: code, Config: &client.ExecutionConfig{Workspace: "shared"}})
		if err != nil {
			t.Fatalf("run via %s: %v", node, err)
		}
		if res.Status != "completed" || res.ExitCode != 0 {
			t.Fatalf("run via %s: %s, exit %d: %s", node, res.Status, res.ExitCode, res.Stderr)
		}
		if res.Node != node {
			t.Fatalf("the run sent to %s ran on %q", node, res.Node)
		}
		if res.Workspace == nil || res.Workspace.Error != "" {
			t.Fatalf("run via %s: workspace outcome %+v", node, res.Workspace)
		}
		return res
	}

	// 1 MiB of random bytes and a file in a folder, written on a.
	wrote := run(a, "a", `import hashlib, os
data = os.urandom(1 << 20)
os.makedirs('/workspace/sub', exist_ok=True)
open('/workspace/sub/data.bin', 'wb').write(data)
open('/workspace/note.txt', 'w').write('written on a\n')
print(hashlib.sha256(data).hexdigest())`)
	sum := strings.TrimSpace(wrote.Stdout)

	// Read on c, and through c's API.
	read := run(c, "c", `import hashlib
print(hashlib.sha256(open('/workspace/sub/data.bin', 'rb').read()).hexdigest())
print(open('/workspace/note.txt').read(), end='')`)
	if want := sum + "\nwritten on a\n"; read.Stdout != want {
		t.Fatalf("the run on c read %q, want %q", read.Stdout, want)
	}
	f, err := c.OpenWorkspaceFile(ctx, "shared", "sub/data.bin", client.WorkspaceHead)
	if err != nil {
		t.Fatalf("download via c: %v", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	f.Close()
	if err != nil || n != 1<<20 || hex.EncodeToString(h.Sum(nil)) != sum {
		t.Fatalf("download via c: %d bytes, %v; sha256 %x, want %s", n, err, h.Sum(nil), sum)
	}

	// A session created through c sees them; what it writes is committed
	// when it ends.
	s, err := c.CreateSession(ctx, &client.SessionRequest{Requirements: "-", Workspace: "shared"})
	if err != nil {
		t.Fatalf("session via c: %v", err)
	}
	cell, err := c.ExecuteCell(ctx, s.SessionID, &client.CellRequest{Code: `import hashlib
print(hashlib.sha256(open('/workspace/sub/data.bin', 'rb').read()).hexdigest())
open('/workspace/from_session.txt', 'w').write('written in a session\n')`})
	if err != nil || strings.TrimSpace(cell.Stdout) != sum {
		t.Fatalf("the session's cell: %+v, %v; want %s", cell, err, sum)
	}
	if err := c.DeleteSession(ctx, s.SessionID); err != nil {
		t.Fatalf("ending the session: %v", err)
	}
	after := run(b, "b", `print(open('/workspace/from_session.txt').read(), end='')
print(open('/workspace/note.txt').read(), end='')`)
	if want := "written in a session\nwritten on a\n"; after.Stdout != want {
		t.Fatalf("the run on b after the session read %q, want %q", after.Stdout, want)
	}
	if after.Workspace.Version <= read.Workspace.Version {
		t.Errorf("the session's end made no version: the run after it saw %d, the one before %d",
			after.Workspace.Version, read.Workspace.Version)
	}
}
