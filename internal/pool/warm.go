package pool

import (
	"context"
	"sync/atomic"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// warmJail is a jail whose runner is started and waits for its request.
type warmJail struct {
	jail   *sandbox.Jail
	proc   *sandbox.Process
	relay  *relay
	forked bool // forked from the kind's fork server, not a jail of its own
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

// dead reports whether the warm payload ended before it got work.
func (w *warmJail) dead() bool {
	select {
	case <-w.proc.Done():
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

// run hands the warm jail spec's execution and waits for it.
func (w *warmJail) run(ctx context.Context, spec sandbox.Spec, request []byte, out sandbox.OutputFunc) (sandbox.Result, error) {
	w.relay.to.Store(&out)
	if err := w.proc.HandOff(spec.Limits, spec.Files, request); err != nil {
		w.proc.Kill()
		res := w.proc.Wait()
		res.Status, res.Reason = sandbox.StatusSetupError, "handing the execution to a warm jail: "+err.Error()
		return res, nil
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
