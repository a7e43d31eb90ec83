package run

import (
	"errors"
	"fmt"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// NetworkRequest is what a request asks of the network: an execution's
// (Prepare) or a session's (the sessions service plans it with
// PlanNetwork at each kernel it starts).
type NetworkRequest struct {
	Network bool
	// Allow narrows the operator's allow list (nil: the operator's).
	Allow []string
	// Secrets are the operator secrets asked for by name.
	Secrets []string
	// Caller is the API key's name a secret's keys list is checked
	// against.
	Caller string
}

// NetPlan is a request's network, checked: its policy, its secrets bound
// to fresh placeholders, and what its egress and jail need. The zero
// NetPlan is "no network".
type NetPlan struct {
	Network bool
	Policy  egress.Policy
	// Secrets are for the egress only: never stored, never logged.
	Secrets   []egress.Bound
	HTTPRules []egress.HTTPRule
	// Trust is the read-only bind of the trust bundle when the egress
	// terminates TLS (nil: none); bundle is its host path.
	Trust  *sandbox.Mount
	bundle string
	// egress is the operator's egress configuration (nil without
	// network).
	egress *egress.Config
}

// PlanNetwork checks req as Prepare checks an execution's network, with
// the same refusals (each wraps ErrInvalid): network disabled on the
// server, an allow list without network, an allow list that does not
// parse, secrets without network or on a server whose egress does not
// terminate TLS, a secret unknown or not for req.Caller, a secret whose
// hosts are outside the request's allow list. Each call draws new
// placeholders and reads the operator's catalog as it is now.
func (pl *Planner) PlanNetwork(req NetworkRequest) (NetPlan, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if req.Network && !pl.cfg.AllowNetwork {
		return NetPlan{}, invalid("network access is disabled on this server")
	}
	if !req.Network && req.Allow != nil {
		return NetPlan{}, invalid("a network allow list without network")
	}
	var policy egress.Policy
	if req.Network {
		var err error
		if policy, err = pl.networkPolicy(req.Allow); err != nil {
			return NetPlan{}, invalid("%v", err)
		}
	}
	cat := pl.cfg.Secrets.Load()
	secrets, err := pl.bindSecrets(req, policy, cat)
	if err != nil {
		return NetPlan{}, invalid("%v", err)
	}
	np := NetPlan{Network: req.Network, Policy: policy, Secrets: secrets, HTTPRules: cat.Rules,
		Trust: pl.trustMount(req.Network, secrets, cat), bundle: pl.cfg.TrustBundle}
	if req.Network {
		np.egress = pl.cfg.Network
	}
	return np, nil
}

// Env adds the plan's secrets' placeholders to env (requested is the
// request's own env, which may not set a secret's name) and, with a
// trust bind, points the TLS variables at the bundle.
func (np NetPlan) Env(env, requested []string) ([]string, error) {
	env, err := secretEnv(env, requested, np.Secrets)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if np.Trust != nil {
		env = trustEnv(env, np.bundle)
	}
	return env, nil
}

// ErrQuotaSpent: what earlier egresses of the same session carried
// reached a byte quota of the operator's.
var ErrQuotaSpent = errors.New("the network byte quota is spent")

// Egress makes an egress for the plan, its limits those of the operator
// less used (what earlier egresses of the same session carried: a
// session's quotas are for its whole life). It fails when the plan has
// no network, and with ErrQuotaSpent when a byte quota is spent.
func (np NetPlan) Egress(used egress.Stats, hooks egress.Hooks) (*egress.Egress, error) {
	if !np.Network || np.egress == nil {
		return nil, errors.New("no network planned")
	}
	cfg := *np.egress
	cfg.HTTPRules = np.HTTPRules
	cfg.Limits = cfg.Limits.WithDefaults()
	cfg.Limits.BytesOut -= used.BytesOut
	cfg.Limits.BytesIn -= used.BytesIn
	if cfg.Limits.BytesOut <= 0 || cfg.Limits.BytesIn <= 0 {
		return nil, ErrQuotaSpent
	}
	return egress.New(cfg, egress.Grant{Policy: np.Policy, Secrets: np.Secrets}, hooks), nil
}
