package detect

import (
	"bufio"
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/pyenv/interp"
)

// stdlibFallback lists the standard library of interpreters older than
// 3.10, which lack sys.stdlib_module_names.
//
//go:embed stdlib_fallback.txt
var stdlibFallback string

// stdlibFlight is the standard library of one interpreter: known once
// done is closed (names nil: the detector failed; the next caller asks
// again).
type stdlibFlight struct {
	done  chan struct{}
	names map[string]bool
	err   error
}

func interpreterKey(in interp.Interpreter) string { return in.Path + "\x00" + in.Full }

// standard returns the top-level modules of in's standard library and its
// built-in modules, asking the detector once per interpreter (a jail run
// on an empty project); concurrent callers wait for the one asking.
func (a *Analyzer) standard(ctx context.Context, in interp.Interpreter) (map[string]bool, error) {
	key := interpreterKey(in)
	a.mu.Lock()
	f, ok := a.stdlibs[key]
	if !ok {
		f = &stdlibFlight{done: make(chan struct{})}
		a.stdlibs[key] = f
	}
	a.mu.Unlock()
	if ok {
		select {
		case <-f.done:
			return f.names, f.err
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the standard library's names: %w", ctx.Err())
		}
	}
	// The other callers wait for this one: it does not stop when its own
	// request ends, only at the detector's timeout.
	out, err := a.detect(context.WithoutCancel(ctx), in, nil)
	if err == nil {
		f.names = standardSet(out)
	}
	f.err = err
	if err != nil {
		a.mu.Lock()
		delete(a.stdlibs, key)
		a.mu.Unlock()
	}
	close(f.done)
	return f.names, f.err
}

// knowStandard records in's standard library, as a detector run on a
// project told it, unless it is known or being asked for.
func (a *Analyzer) knowStandard(in interp.Interpreter, names map[string]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := interpreterKey(in)
	if _, ok := a.stdlibs[key]; ok {
		return
	}
	f := &stdlibFlight{done: make(chan struct{}), names: names}
	close(f.done)
	a.stdlibs[key] = f
}

// standardSet is the detector's standard library and built-in modules.
func standardSet(out *detectorOutput) map[string]bool {
	names := out.Stdlib
	if names == nil {
		names = fallbackStdlib()
	}
	set := make(map[string]bool, len(names)+len(out.Builtin))
	for _, n := range names {
		set[n] = true
	}
	for _, n := range out.Builtin {
		set[n] = true
	}
	return set
}

func fallbackStdlib() []string {
	var names []string
	sc := bufio.NewScanner(strings.NewReader(stdlibFallback))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			names = append(names, l)
		}
	}
	return names
}
