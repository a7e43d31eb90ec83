package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// spinnerFrames animate the spinner, one byte a frame.
const spinnerFrames = `|/-\`

// spinnerTick is how often the spinner turns while nothing arrives.
const spinnerTick = 120 * time.Millisecond

// progressWidth bounds a spinner line so that it never wraps.
const progressWidth = 100

// progress shows what a person waits for on stderr. On a terminal it is
// one line that a spinner redraws in place: the latest install line, or a
// note such as "starting a session"; Stop clears it so that the program's
// own output starts on a clean line, and a later line brings it back.
// Elsewhere (a pipe, a file) only install lines are written, one plain
// "install: ..." line each, and notes are not. With quiet it shows
// nothing. Create it with newProgress and always Stop it.
type progress struct {
	w     io.Writer
	tty   bool
	quiet bool

	mu    sync.Mutex
	line  string
	frame int
	shown bool          // a spinner line is on screen
	stop  chan struct{} // closed by Stop; nil while the spinner is not turning
	wg    sync.WaitGroup
}

func newProgress(w io.Writer, quiet bool) *progress {
	return &progress{w: w, tty: isTerminal(w), quiet: quiet}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
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
	p.show("installing dependencies: " + line)
}

// Note shows what is being waited for, on a terminal only.
func (p *progress) Note(text string) {
	if p.quiet || !p.tty {
		return
	}
	p.show(text)
}

// show draws text as the spinner line and starts the spinner.
func (p *progress) show(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line = text
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
	text := p.line
	if r := []rune(text); len(r) > progressWidth {
		text = string(r[:progressWidth-1]) + "…"
	}
	fmt.Fprintf(p.w, "\r%c %s\x1b[K", spinnerFrames[p.frame%len(spinnerFrames)], text)
	p.shown = true
}

// Stop ends the spinner and clears its line. It is safe to call more than
// once; a later Install or Note starts the spinner again.
func (p *progress) Stop() {
	p.mu.Lock()
	stop := p.stop
	p.stop = nil
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
