package pool

import (
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Executions with network take warm jails too. A kind whose spec has
// network keeps jails of its own (never forked: the children of a fork
// server share its network namespace), each prepared with a network
// namespace that holds only its loopback. At hand-off the execution's own
// egress (its allow list, secrets, HTTP rules and quotas, made by the
// engine as for a cold run) is attached to the jail it took, before a line
// of its code runs. A warm jail serves one execution and is then
// destroyed, so no namespace, device or connection outlives the
// execution it was given to.

// attachEgress gives w the route out of spec's execution, when it has
// network: a TUN device in w's network namespace, served by spec.Egress.
// The caller runs nothing in w when it fails.
func attachEgress(w *warmJail, spec sandbox.Spec) error {
	if !spec.Network {
		return nil
	}
	return w.jail.AttachEgress(spec.Egress)
}
