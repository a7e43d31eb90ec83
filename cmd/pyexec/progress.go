package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// spinnerFrames animate the install spinner, one byte a frame.
const spinnerFrames = `|/-\`

// spinnerTick is how often the spinner turns while nothing arrives.
const spinnerTick = 120 * time.Millisecond

// progressWidth bounds a spinner line so that it never wraps.
const progressWidth = 100

// progress shows an execution's install events on stderr: on a terminal,
// one line that a spinner redraws in place and that is cleared when the
// install ends; elsewhere, one plain "install: ..." line per event. With
// quiet it shows nothing. Create it with newProgress and always Stop it.
type progress struct {
	w     io.Writer
	tty   bool
	quiet bool

	mu     sync.Mutex
	line   string
	frame  int
	shown  bool          // a spinner line is on screen
	stop   chan struct{} // closed by Stop; nil until the spinner starts
	wg     sync.WaitGroup
	closed bool
}

func newProgress(w io.Writer, quiet bool) *progress {
	return &progress{w: w, tty: isTerminal(w), quiet: quiet}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Install shows one line of installer output.
func (p *progress) Install(line string) {
	if p.quiet {
		return
	}
	line = strings.TrimSpace(line)
	if !p.tty {
		fmt.Fprintf(p.w, "install: %s\n", line)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.line = line
	p.drawLocked()
	if p.stop == nil {
		p.stop = make(chan struct{})
		p.wg.Add(1)
		go p.spin(p.stop)
	}
}

// spin turns the spinner until stop is closed.
func (p *progress) spin(stop chan struct{}) {
	defer p.wg.Done()
	t := time.NewTicker(spinnerTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.frame++
			p.drawLocked()
			p.mu.Unlock()
		}
	}
}

func (p *progress) drawLocked() {
	text := "installing dependencies: " + p.line
	if r := []rune(text); len(r) > progressWidth {
		text = string(r[:progressWidth-1]) + "…"
	}
	fmt.Fprintf(p.w, "\r%c %s\x1b[K", spinnerFrames[p.frame%len(spinnerFrames)], text)
	p.shown = true
}

// Stop ends the spinner and clears its line, so that the program's own
// output starts on a clean line. It is safe to call more than once.
func (p *progress) Stop() {
	p.mu.Lock()
	stop := p.stop
	p.stop, p.closed = nil, true
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		p.wg.Wait()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}
