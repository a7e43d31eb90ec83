package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// TestWorkspaceOfAnEndedJailSaysItEnded: a payload whose jail's PID 1 is
// gone, before Wait knows it, has no workspace to open; the error says
// the process is done (a session's route answers that it ended) rather
// than a missing path (an internal error).
func TestWorkspaceOfAnEndedJailSaysItEnded(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", gone.Process.Pid)); err == nil {
		t.Skipf("pid %d was reused already", gone.Process.Pid)
	}
	p := &Process{j: &Jail{m: &Manager{}, cmd: gone}, done: make(chan struct{})}
	root, err := p.Workspace()
	if err == nil {
		root.Close()
		t.Fatal("opened the workspace of an ended jail")
	}
	if !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("Workspace: %v, want an error wrapping os.ErrProcessDone", err)
	}
}
