package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/chzyer/readline"
	"golang.org/x/term"
)

// errInterrupted is what readLine returns on Ctrl-C at the prompt, with
// whatever had been typed on the line.
var errInterrupted = errors.New("interrupted")

// lineSource gives the repl its lines: an editor with history on a
// terminal, plain lines from a pipe or file otherwise.
type lineSource interface {
	// readLine shows prompt (on a terminal) and returns the next line
	// without its end; io.EOF at the end of the input, errInterrupted on
	// Ctrl-C.
	readLine(prompt string) (string, error)
	// interactive reports whether a person types the lines.
	interactive() bool
	// historyFile is where the lines are remembered ("" if nowhere).
	historyFile() string
	close() error
}

// newLineSource returns the editor when in and out are both terminals,
// otherwise a reader of plain lines; sigs delivers Ctrl-C (SIGINT) for
// the latter.
func newLineSource(in io.Reader, out, errw io.Writer, sigs <-chan os.Signal) (lineSource, error) {
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) || !isTerminal(out) {
		return newPipeSource(in, sigs), nil
	}
	hist, err := historyPath(os.Getenv, os.UserHomeDir, os.UserConfigDir)
	if err == nil {
		err = prepareHistory(hist)
	}
	if err != nil {
		fmt.Fprintf(errw, "pyexec: no history: %v\n", err)
		hist = ""
	}
	rl, err := readline.NewEx(&readline.Config{
		Prompt:          ">>> ",
		HistoryFile:     hist,
		InterruptPrompt: "^C",
		Stdin:           readline.NewCancelableStdin(f),
		Stdout:          out,
		Stderr:          errw,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the line editor: %w", err)
	}
	return &editorSource{rl: rl, hist: hist}, nil
}

// historyPath returns the per-user file of the repl's history, outside
// any jail: $XDG_STATE_HOME/pyexec/repl_history when that is set, else
// ~/.local/state/pyexec/repl_history on Linux and the BSDs, and the
// user's configuration directory (Application Support, %AppData%) on
// macOS and Windows, whose conventions have no state directory.
func historyPath(getenv func(string) string, home, config func() (string, error)) (string, error) {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "pyexec", "repl_history"), nil
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		d, err := config()
		if err != nil {
			return "", err
		}
		return filepath.Join(d, "pyexec", "repl_history"), nil
	}
	h, err := home()
	if err != nil {
		return "", err
	}
	return filepath.Join(h, ".local", "state", "pyexec", "repl_history"), nil
}

// prepareHistory creates the history's directory and file readable by
// the user only: lines typed at a prompt may hold secrets.
func prepareHistory(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// editorSource reads lines with editing and history.
type editorSource struct {
	rl   *readline.Instance
	hist string
}

func (e *editorSource) readLine(prompt string) (string, error) {
	e.rl.SetPrompt(prompt)
	line, err := e.rl.Readline()
	if errors.Is(err, readline.ErrInterrupt) {
		return line, errInterrupted
	}
	return line, err
}

func (e *editorSource) interactive() bool   { return true }
func (e *editorSource) historyFile() string { return e.hist }
func (e *editorSource) close() error        { return e.rl.Close() }

// pipeSource reads plain lines; a goroutine reads ahead so that Ctrl-C
// can end a wait for input. The goroutine ends at the end of the input.
type pipeSource struct {
	lines chan string
	err   chan error // the reader's last error, once
	end   error      // that error, once received
	sigs  <-chan os.Signal
}

func newPipeSource(in io.Reader, sigs <-chan os.Signal) *pipeSource {
	p := &pipeSource{lines: make(chan string), err: make(chan error, 1), sigs: sigs}
	go func() {
		br := bufio.NewReader(in)
		defer close(p.lines)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				p.lines <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				p.err <- err
				return
			}
		}
	}()
	return p
}

func (p *pipeSource) readLine(string) (string, error) {
	select {
	case <-p.sigs:
		return "", errInterrupted
	case line, ok := <-p.lines:
		if ok {
			return line, nil
		}
		if p.end == nil {
			p.end = <-p.err
		}
		return "", p.end
	}
}

func (p *pipeSource) interactive() bool   { return false }
func (p *pipeSource) historyFile() string { return "" }
func (p *pipeSource) close() error        { return nil }
