package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestSignalNeverReachesAReusedNumber: a process group signalled through
// its leader's /proc directory is never the group of a later process that
// got the leader's number: signalGroup says os.ErrProcessDone, and that
// process lives on; so does the fallback of kernels before 6.9.
// (Signalling by number, as Process.Signal did before, killed it.)
func TestSignalNeverReachesAReusedNumber(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("choosing the next pid (ns_last_pid) needs root")
	}
	t.Run("group flag", func(t *testing.T) { signalAfterReuse(t, signalGroup) })
	t.Run("by number", func(t *testing.T) { signalAfterReuse(t, signalGroupByNumber) })
}

// signalAfterReuse signals, with send, a group whose leader's number
// another process got since.
func signalAfterReuse(t *testing.T, send func(*os.File, int, syscall.Signal) error) {
	leader := func() *exec.Cmd {
		c := exec.Command("sleep", "600")
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := leader()
	pid := first.Process.Pid
	dir, err := os.Open("/proc/" + strconv.Itoa(pid))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if err := send(dir, pid, 0); err != nil {
		t.Fatalf("signalling the live group: %v", err)
	}
	_ = first.Process.Kill()
	_ = first.Wait()

	// The next process to start gets the number after ns_last_pid, unless
	// another one starts in between: tried until it is ours. Then the
	// counter goes back to where it was, so that the machine's other
	// processes do not get the numbers freed meanwhile.
	const lastPid = "/proc/sys/kernel/ns_last_pid"
	was, err := os.ReadFile(lastPid)
	if err != nil {
		t.Skipf("reading the last pid: %v", err)
	}
	defer func() { _ = os.WriteFile(lastPid, was, 0) }()
	var second *exec.Cmd
	for range 20 {
		if err := os.WriteFile(lastPid, []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("choosing the next pid: %v", err)
		}
		c := leader()
		if c.Process.Pid == pid {
			second = c
			break
		}
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	if second == nil {
		t.Skip("other processes took the number each time")
	}
	ended := make(chan error, 1)
	go func() { ended <- second.Wait() }()
	defer func() {
		_ = second.Process.Kill()
		<-ended
	}()

	if err := send(dir, pid, syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("signalling the group that ended: %v, want os.ErrProcessDone", err)
	}
	select {
	case err := <-ended:
		ended <- err
		t.Errorf("the process that got the number afterwards was signalled: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
}
