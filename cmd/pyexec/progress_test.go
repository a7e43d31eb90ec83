package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// On a terminal, follow shows the install lines in the spinner from the
// first (pending) status on, keeps them through the status changes, and
// clears the spinner before the program's output.
func TestFollowSpinnerOnATerminal(t *testing.T) {
	stream := sse(1, "status", "pending") + sse(2, "install", "Resolved 1 package in 3ms") +
		sse(3, "status", "running") + sse(4, "install", "Installed 1 package in 5ms") +
		sse(5, "stdout", "ok\n") + sse(6, "status", "completed")
	api := &fakeAPI{t: t, events: stream, result: resOK}
	url := api.start()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	screen := make(chan string)
	go func() {
		b, _ := io.ReadAll(ptmx) // ends with EIO once the terminal side is closed
		screen <- string(b)
	}()
	var stdout bytes.Buffer
	code := execute([]string{"follow", "--server", url, "exe_1"}, &stdout, tty)
	tty.Close()
	out := <-screen
	if code != 0 || stdout.String() != "ok\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout.String())
	}
	for _, want := range []string{"installing dependencies: Resolved 1 package in 3ms\x1b[K", "installing dependencies: Installed 1 package in 5ms\x1b[K"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal shows %q, want it to contain %q", out, want)
		}
	}
	if strings.Contains(out, "install: ") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("terminal shows %q: want the spinner only, cleared at the end", out)
	}
}
