package pool

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// warmJail is a jail whose runner is started and waits for its request.
type warmJail struct {
	jail  *sandbox.Jail
	proc  *sandbox.Process
	relay *relay
	// tpl is the fork server it was forked from (nil: a jail of its own);
	// its executions die with it. bare says that server imported none of
	// the preloads.
	tpl  *sandbox.Template
	bare bool
	// precopied says it copied ahead what executions of tpl write.
	precopied bool
}

// relay forwards the payload's output to whoever holds the jail now:
// nobody while it waits, the execution after the hand-off.
type relay struct {
	to atomic.Pointer[sandbox.OutputFunc]
}

func (r *relay) out(s sandbox.Stream, b []byte) {
	if f := r.to.Load(); f != nil && *f != nil {
		(*f)(s, b)
	}
}

// startWarm builds one warm jail of spec.
func startWarm(ctx context.Context, jails Jails, spec sandbox.Spec) (*warmJail, error) {
	j, err := jails.Prepare(ctx, sandbox.Base{Mounts: spec.Mounts, Network: spec.Network})
	if err != nil {
		return nil, err
	}
	r := &relay{}
	// The payload's own context is the pool's: it must outlive the request
	// that built it. Each execution's context is watched in run.
	proc, err := j.Start(ctx, spec, r.out)
	if err != nil {
		j.Close()
		return nil, err
	}
	return &warmJail{jail: j, proc: proc, relay: r}, nil
}

// dead reports whether the warm payload ended before it got work, or is
// about to because its fork server ended.
func (w *warmJail) dead() bool {
	var tplDone <-chan struct{}
	if w.tpl != nil {
		tplDone = w.tpl.Done()
	}
	select {
	case <-w.proc.Done():
		return true
	case <-tplDone:
		return true
	default:
		return false
	}
}

func (w *warmJail) discard() error {
	w.proc.Kill()
	w.proc.Wait()
	return w.jail.Close()
}

// errHandOff says a warm jail could not take its execution (it died
// while waiting, say with its fork server): nothing of the execution ran.
var errHandOff = errors.New("handing the execution to a warm jail")

// run hands the warm jail spec's execution and waits for it. It fails with
// errHandOff, and nothing else, when the execution never started.
func (w *warmJail) run(ctx context.Context, spec sandbox.Spec, request []byte, out sandbox.OutputFunc) (sandbox.Result, error) {
	// Output may follow the request at once: its receiver must be in place.
	w.relay.to.Store(&out)
	if err := w.proc.HandOff(spec.Limits, spec.Files, request); err != nil {
		w.proc.Kill()
		w.proc.Wait()
		return sandbox.Result{}, fmt.Errorf("%w: %w", errHandOff, err)
	}
	go func() {
		if len(spec.Stdin) > 0 {
			_ = w.proc.WriteStdin(spec.Stdin)
		}
		_ = w.proc.CloseStdin()
	}()
	stop := context.AfterFunc(ctx, w.proc.Kill)
	defer stop()
	return w.proc.Wait(), nil
}
