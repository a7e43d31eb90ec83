package netns

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestShared(t *testing.T) {
	self := os.Getpid()
	if same, err := Shared(self, self); err != nil || !same {
		t.Fatalf("a process and itself: %v %v", same, err)
	}
	if os.Geteuid() != 0 {
		t.Skip("a network namespace of its own needs root")
	}
	cmd := exec.Command("unshare", "--net", "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("unshare:", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// unshare replaces itself with sleep once the namespace is made.
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid)); string(b) == "sleep\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare did not start sleep")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if same, err := Shared(self, cmd.Process.Pid); err != nil || same {
		t.Fatalf("a process in a new network namespace: shared %v, %v", same, err)
	}
}
