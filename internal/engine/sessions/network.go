package sessions

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/snapshot"
)

// NetworkPlanner checks a session's network as an execution's is checked:
// the operator's switch, the allow list, the secrets and the keys they
// are for (*run.Planner implements it).
type NetworkPlanner interface {
	PlanNetwork(run.NetworkRequest) (run.NetPlan, error)
}

// asksNetwork reports whether req asks for anything of the network.
func asksNetwork(req Request) bool {
	return req.Network || req.NetworkAllow != nil || len(req.Secrets) > 0
}

// planNetwork checks what req asks of the network and draws its secrets'
// placeholders; the zero plan for a request that asks nothing. A server
// without a planner refuses a request that asks (400).
func (m *Service) planNetwork(req Request) (run.NetPlan, error) {
	if !asksNetwork(req) {
		return run.NetPlan{}, nil
	}
	if m.deps.Network == nil {
		return run.NetPlan{}, invalidf("network access is disabled on this server")
	}
	return m.deps.Network.PlanNetwork(run.NetworkRequest{Network: req.Network, Allow: req.NetworkAllow,
		Secrets: req.Secrets, Caller: req.Caller})
}

// withNetwork is spec with np's environment (secrets' placeholders, the
// trust variables) over the session's own (req.Env) and np's trust
// bundle mounted.
func withNetwork(spec sandbox.Spec, req Request, np run.NetPlan) (sandbox.Spec, error) {
	env, err := run.BuildEnv(req.Env)
	if err != nil {
		return spec, invalidf("%v", err)
	}
	if spec.Env, err = np.Env(env, req.Env); err != nil {
		return spec, err
	}
	if np.Trust != nil && !slices.Contains(spec.Mounts, *np.Trust) {
		spec.Mounts = append(slices.Clone(spec.Mounts), *np.Trust)
	}
	return spec, nil
}

// replanNetwork checks s's network again before a new kernel of s starts
// (a restart, a resume): the operator's catalog as it is now, the key's
// right to each secret, with new placeholders in the returned spec. A
// session without network gets spec as it is.
func (m *Service) replanNetwork(s *Live, spec sandbox.Spec) (sandbox.Spec, run.NetPlan, error) {
	if !asksNetwork(s.req) {
		return spec, run.NetPlan{}, nil
	}
	req := s.req
	req.Caller = s.caller
	np, err := m.planNetwork(req)
	if err != nil {
		return spec, np, err
	}
	spec, err = withNetwork(spec, req, np)
	return spec, np, err
}

// MayRunCode reports whether caller, who is not s's owner (an operator),
// may run code in s (a cell, a restart, a fork, a file it might import):
// ErrSecretsOfOwner when s holds a secret that caller could not ask for
// itself (one kept for other keys), as the operator's catalog is now.
// Code run there would have the owner's secret injected on its behalf.
func (m *Service) MayRunCode(s *Live, caller string) error {
	if len(s.req.Secrets) == 0 {
		return nil
	}
	req := s.req
	req.Caller = caller
	if _, err := m.planNetwork(req); err != nil {
		return fmt.Errorf("%w (%s)", ErrSecretsOfOwner, s.id)
	}
	return nil
}

// errNetworkRefused: the planner refuses a session's network at a resume
// (the error wraps its reason, an ErrInvalid).
var errNetworkRefused = errors.New("the session's network is refused")

// maxPendingEvents bounds the network events a session keeps for its
// next cell's result, as many as its hibernation carries; later ones are
// only logged.
const maxPendingEvents = snapshot.MaxNetworkEvents

// netUse is a session's network over its whole life: the bytes its
// egresses carried (its quotas are per session, not per kernel) and the
// events not yet handed to a cell.
type netUse struct {
	mu   sync.Mutex
	used egress.Stats
	// limit is the first limit that cut the session's network: its later
	// kernels start without a route out.
	limit   string
	pending []egress.Event
}

// spent adds an ended egress's totals, and the limit that cut it.
func (u *netUse) spent(st egress.Stats) {
	u.mu.Lock()
	u.used.BytesOut += st.BytesOut
	u.used.BytesIn += st.BytesIn
	if u.limit == "" {
		u.limit = st.LimitReason
	}
	u.mu.Unlock()
}

// limited is the limit that cut the session's network, "" if none.
func (u *netUse) limited() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.limit
}

// maxCarriedEventBytes bounds the JSON of the events a snapshot's header
// carries, so that they never make it too large to write (a header is at
// most 1 MiB, the session's variables' names included): 1000 events of
// the longest names and paths, escaped, would take about 2 MiB.
const maxCarriedEventBytes = 256 << 10

// carried is what a hibernation header carries of u (nil u: a session
// without network), with live, the totals of an egress still open: the
// events not yet taken too, the earliest within maxCarriedEventBytes,
// which stay u's as well (the session may go on here).
func (u *netUse) carried(live egress.Stats) *snapshot.NetworkUsed {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	n := &snapshot.NetworkUsed{BytesOut: u.used.BytesOut + live.BytesOut, BytesIn: u.used.BytesIn + live.BytesIn,
		Limit: cmp.Or(u.limit, live.LimitReason), Events: slices.Clone(u.pending)}
	u.mu.Unlock()
	size := 0
	for i, ev := range n.Events {
		b, _ := json.Marshal(ev) // plain fields: it never fails
		if size += len(b) + 1; size > maxCarriedEventBytes {
			n.Events = n.Events[:i]
			break
		}
	}
	return n
}

// restored is a session's use as its hibernation header carried it, the
// events it had not handed to a cell kept for its next cell's result
// (those past maxPendingEvents dropped, as a live session drops them).
func restored(n *snapshot.NetworkUsed) *netUse {
	if n == nil {
		return &netUse{}
	}
	return &netUse{used: egress.Stats{BytesOut: n.BytesOut, BytesIn: n.BytesIn}, limit: n.Limit,
		pending: slices.Clone(n.Events[:min(len(n.Events), maxPendingEvents)])}
}

// liveEgressStats are the totals so far of k's egress (zero: none).
func (k *kernel) liveEgressStats() egress.Stats {
	k.egMu.Lock()
	defer k.egMu.Unlock()
	if k.eg == nil {
		return egress.Stats{}
	}
	return k.eg.Stats()
}

func (u *netUse) totals() egress.Stats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.used
}

func (u *netUse) add(ev egress.Event) {
	u.mu.Lock()
	if len(u.pending) < maxPendingEvents {
		u.pending = append(u.pending, ev)
	}
	u.mu.Unlock()
}

// take returns the events since the last take.
func (u *netUse) take() []egress.Event {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.pending
	u.pending = nil
	return out
}

// startEgress makes the egress of a kernel of session net.id with plan
// net.plan: its events are logged with the session's id and key (a
// secret's at warning level), a secret's go to the audit trail
// (Deps.OnSecretEvent), and all are kept for the next cell's result;
// going over a limit cuts every connection, and the session has no
// network for the rest of its life (the egress refuses every later
// connection; a later kernel's egress gets what is left of the byte
// quotas, none when they are spent).
func (m *Service) startEgress(net *kernelNet) (*egress.Egress, error) {
	use := net.use
	eg, err := net.plan.Egress(use.totals(), egress.Hooks{
		Event: func(ev egress.Event) {
			use.add(ev)
			if m.deps.OnNetworkEvent != nil {
				m.deps.OnNetworkEvent(ev)
			}
			level := slog.LevelInfo
			if ev.Secret != "" {
				level = slog.LevelWarn
				if m.deps.OnSecretEvent != nil {
					m.deps.OnSecretEvent(net.id, net.caller, ev)
				}
			}
			m.log.Log(context.Background(), level, "session network event", "session_id", net.id, "caller", net.caller,
				"proto", ev.Proto, "host", ev.Host, "port", ev.Port, "verdict", ev.Verdict, "reason", ev.Reason,
				"secret", ev.Secret, "method", ev.Method, "path", ev.Path, "status", ev.Status,
				"bytes_out", ev.BytesOut, "bytes_in", ev.BytesIn)
		},
		Limit: func(limit string) {
			m.log.Warn("session network limit exceeded: its connections are cut", "session_id", net.id,
				"caller", net.caller, "limit", limit)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("the session's egress: %w", err)
	}
	return eg, nil
}

// egressClosed logs what an ended egress of session net.id did not
// report: the events dropped past its budgets.
func (m *Service) egressClosed(net *kernelNet, st egress.Stats) {
	if st.Dropped > 0 {
		m.log.Warn("session network closed with events dropped past the budget", "session_id", net.id,
			"caller", net.caller, "events", st.Events, "events_dropped", st.Dropped)
	}
}

// kernelNet is the network of s's next kernel (nil: none); s.net is
// set before the kernel starts.
func (s *Live) kernelNet() *kernelNet {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.spec.Network {
		return nil
	}
	return &kernelNet{id: s.id, caller: s.caller, plan: s.net, use: s.use}
}

// hasEgress reports whether the kernel has an egress now.
func (k *kernel) hasEgress() bool {
	k.egMu.Lock()
	defer k.egMu.Unlock()
	return k.eg != nil
}

// recheckNetwork checks the network of every live kernel with an egress
// again, as the planner sees it now: a session whose network it refuses
// (a secret removed from the operator's file, or no longer for the
// session's key, after a SIGHUP) has its egress closed at once, every
// connection cut, and runs on without a route out; its next kernel
// (restart, resume) is refused. The reaper calls it at each tick.
func (m *Service) recheckNetwork() {
	type check struct {
		s *Live
		k *kernel
	}
	var checks []check
	m.mu.Lock()
	for _, s := range m.live {
		s.mu.Lock()
		if k := s.k; k != nil && s.use != nil && k.hasEgress() {
			checks = append(checks, check{s, k})
		}
		s.mu.Unlock()
	}
	m.mu.Unlock()
	for _, c := range checks {
		req := c.s.req
		req.Caller = c.s.caller
		if _, err := m.planNetwork(req); err != nil {
			c.k.closeEgress()
			m.log.Warn("a session's network is refused now: its egress is closed", "session_id", c.s.id, "err", err)
		}
	}
}
