package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
	"github.com/pyexec/pyexec/internal/testserver"
)

// terminal is a pyexec process on a pseudo-terminal, as a person runs it.
type terminal struct {
	t      *testing.T
	ptmx   *os.File
	screen *testserver.LogBuffer
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has ended
	read   chan struct{} // closed when everything it wrote has been read
}

// startTerminal runs pyexec args on a new pseudo-terminal with env.
func startTerminal(t *testing.T, env []string, args ...string) *terminal {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatalf("starting pyexec on a pty: %v", err)
	}
	term := &terminal{t: t, ptmx: ptmx, screen: &testserver.LogBuffer{}, cmd: cmd, done: make(chan struct{}), read: make(chan struct{})}
	go func() {
		defer close(term.read)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			term.screen.Write(buf[:n])
			if err != nil { // EIO once the process closed the terminal
				return
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(term.done)
	}()
	t.Cleanup(func() {
		select {
		case <-term.done:
		default:
			_ = cmd.Process.Kill()
			<-term.done
		}
		ptmx.Close()
	})
	return term
}

// typeKeys sends keys as if typed.
func (term *terminal) typeKeys(keys string) {
	term.t.Helper()
	if _, err := term.ptmx.WriteString(keys); err != nil {
		term.t.Fatal(err)
	}
}

// waitFor waits until text has appeared at least n times on the screen.
// waitTime bounds every wait for the screen: the first prompt follows the
// base environment's install, minutes under emulation (make test-vm).
const waitTime = 4 * time.Minute

func (term *terminal) waitFor(text string, n int) {
	term.t.Helper()
	term.waitUntil(fmt.Sprintf("%q shown %d times", text, n), func(screen string) bool {
		return strings.Count(screen, text) >= n
	})
}

// waitPromptAfter waits until a prompt is drawn after the last output
// text: keys typed before it would reach a terminal still in cooked mode,
// which echoes an arrow key instead of handing it to the line editor.
func (term *terminal) waitPromptAfter(text string) {
	term.t.Helper()
	term.waitUntil(fmt.Sprintf("a prompt after %q", text), func(screen string) bool {
		i := strings.LastIndex(screen, text)
		return i >= 0 && strings.Contains(screen[i:], ">>> ")
	})
}

func (term *terminal) waitUntil(what string, done func(screen string) bool) {
	term.t.Helper()
	deadline := time.Now().Add(waitTime)
	for !done(term.screen.String()) {
		if time.Now().After(deadline) {
			term.t.Fatalf("no %s within %s; the screen:\n%s", what, waitTime, term.screen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wait waits for the process to end and its last output to be read, and
// returns its exit code.
func (term *terminal) wait() int {
	term.t.Helper()
	select {
	case <-term.done:
		select {
		case <-term.read:
		case <-time.After(5 * time.Second): // a child may hold the terminal open
		}
		return term.cmd.ProcessState.ExitCode()
	case <-time.After(60 * time.Second):
		term.t.Fatalf("pyexec did not end; the screen:\n%s", term.screen)
		return -1
	}
}

// TestReplOnATerminal drives `pyexec repl` through a pty against a real
// server: the up arrow recalls the last line (also in the next repl, from
// the per-user history file), and a multi-line def block works.
func TestReplOnATerminal(t *testing.T) {
	needRoot(t)
	s := startServer(t, t.TempDir())
	state := t.TempDir()
	env := cleanEnv("PYEXEC_SERVER="+s.url, "XDG_STATE_HOME="+state, "TERM=xterm")

	term := startTerminal(t, env, "repl")
	term.waitFor(">>> ", 1)
	term.typeKeys("n = 1; print('n is', n)\r")
	term.waitFor("n is 1", 1)
	term.typeKeys("n += 1; print('n is', n)\r")
	term.waitFor("n is 2", 1)
	term.waitPromptAfter("n is 2")
	term.typeKeys("\x1b[A") // up: the last line again
	term.typeKeys("\r")
	term.waitFor("n is 3", 1)

	continuation := strings.Count(term.screen.String(), "... ")
	term.typeKeys("def twice(a):\r")
	term.waitFor("... ", continuation+1)
	term.typeKeys("    return a * 2\r")
	term.waitFor("... ", continuation+2)
	term.typeKeys("\r")
	term.typeKeys("print('twice gives', twice(21))\r")
	term.waitFor("twice gives 42", 1)
	term.typeKeys("\x04") // Ctrl-D ends the prompt and the session
	if code := term.wait(); code != 0 {
		t.Fatalf("repl exited %d; the screen:\n%s", code, term.screen)
	}
	if strings.Contains(term.screen.String(), "^[[A") {
		t.Errorf("the up arrow was printed, not handled:\n%s", term.screen)
	}

	hist := filepath.Join(state, "pyexec", "repl_history")
	fi, err := os.Stat(hist)
	if err != nil {
		t.Fatalf("no history file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("history file mode %v, want 0600 (lines may hold secrets)", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(hist)
	for _, want := range []string{"n += 1; print('n is', n)", "def twice(a):", "print('twice gives', twice(21))"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("history lacks %q:\n%s", want, data)
		}
	}

	// A new prompt (and a new session) recalls the history of the last.
	again := startTerminal(t, env, "repl")
	again.waitFor(">>> ", 1)
	again.typeKeys("\x1b[A")
	again.typeKeys("\r")
	// the last line of the last prompt, in a session where twice is unknown
	again.waitFor("NameError: name 'twice' is not defined", 1)
	again.typeKeys("\x04")
	if code := again.wait(); code != 0 {
		t.Fatalf("second repl exited %d; the screen:\n%s", code, again.screen)
	}
}

// TestRunSpinnerOnATerminal: on a terminal, a run that installs its
// requirements shows the installer's lines in a spinner, cleared before
// the program's output; on pipes the output stays clean.
func TestRunSpinnerOnATerminal(t *testing.T) {
	needRoot(t)
	uv, _ := pyenvtest.Tools(t)
	ix := pyenvtest.NewIndex(t, pyenvtest.Wheel{Name: "tinyreq", Version: "2.0", Files: map[string]string{"tinyreq.py": "NAME = 'req'\n"}})
	s := startServer(t, t.TempDir(), "--env-dir", pyenvtest.EnvDir(t), "--uv", uv, "--index-url", ix.URL)
	dir := t.TempDir()
	job := filepath.Join(dir, "job.py")
	if err := os.WriteFile(job, []byte("import tinyreq\nprint('got', tinyreq.NAME)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reqs, pinned := filepath.Join(dir, "requirements.txt"), filepath.Join(dir, "pinned.txt")
	if os.WriteFile(reqs, []byte("tinyreq\n"), 0o644) != nil || os.WriteFile(pinned, []byte("tinyreq==2.0\n"), 0o644) != nil {
		t.Fatal("writing the requirements")
	}

	term := startTerminal(t, cleanEnv("PYEXEC_SERVER="+s.url, "TERM=xterm"), "run", job, "--requirements", reqs)
	if code := term.wait(); code != 0 {
		t.Fatalf("exit %d; the screen:\n%s", code, term.screen)
	}
	screen := term.screen.String()
	spin := strings.Index(screen, "installing dependencies: ")
	clear := strings.LastIndex(screen, "\r\x1b[K")
	out := strings.Index(screen, "got req")
	if spin < 0 || out < 0 || clear < spin || clear > out {
		t.Errorf("want install lines in a spinner, cleared before the output; the screen:\n%q", screen)
	}

	// The environment exists now; a second requirement set installs again,
	// this time with stdout and stderr on pipes.
	r := cli(t, s.url, "", "run", job, "--requirements", pinned)
	if r.code != 0 || r.stdout != "got req\n" || strings.ContainsAny(r.stderr, "\r\x1b") {
		t.Errorf("on pipes: %+v", r)
	}
}
