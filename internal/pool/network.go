package pool

import (
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Executions with network take warm executions too: forked from a fork
// server of their own kind (its root has the egress's resolv.conf and CA
// certificates, its namespace only a loopback), or warm jails where a
// kind does not fork. Either way each execution has a network namespace
// of its own, made when it was forked or its jail prepared, holding only
// its loopback; at hand-off the execution's own egress (its allow list,
// secrets, HTTP rules and quotas, made by the engine as for a cold run)
// is attached there, before a line of its code runs. A warm execution
// serves one execution and is then destroyed, so no namespace, device or
// connection outlives the execution it was given to. Such a kind starts,
// like any, on its first execution, and keeps at most NetworkMax ready.
// Code that needs only the standard library forks, with network as
// without, from its fork server's lean server (no preloads to copy or
// tear down); the kinds with network have NetworkMax fork servers of
// their own (serverSlots), so that they never take the place of another
// kind's.

// attachEgress gives w the route out of spec's execution, when it has
// network: a TUN device in w's network namespace, served by spec.Egress.
// The caller runs nothing in w when it fails.
func attachEgress(w *warmJail, spec sandbox.Spec) error {
	if !spec.Network {
		return nil
	}
	return w.jail.AttachEgress(spec.Egress)
}

// prepareLink makes w's egress device ahead when its kind has network, so
// that the hand-off only starts serving it (sandbox.Jail.PrepareEgressLink).
// Where that fails, attachEgress makes it at hand-off, and fails closed.
func (p *Pool) prepareLink(w *warmJail, spec sandbox.Spec) {
	if !spec.Network {
		return
	}
	if err := w.jail.PrepareEgressLink(); err != nil {
		p.cfg.Logger.Warn("making a warm execution's egress device ahead; it is made at hand-off", "python", describe(spec), "err", err)
	}
}
