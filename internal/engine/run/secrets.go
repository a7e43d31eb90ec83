package run

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/egress"
)

// bindSecrets checks the secrets req asks for and binds each to a fresh
// placeholder: network must be on, the server must terminate TLS, each
// name must be in the catalog (the façade checked the caller may use it),
// and each secret's hosts must be within the request's policy. Any of
// these failing refuses the execution: a secret that cannot be applied is
// never silently left out.
func (pl *Planner) bindSecrets(req Request, policy egress.Policy) ([]egress.Bound, error) {
	if len(req.Secrets) == 0 {
		return nil, nil
	}
	switch {
	case !req.Network:
		return nil, errors.New("secrets need network (config.network_disabled: false)")
	case pl.cfg.Network == nil || pl.cfg.Network.Intercept == nil || pl.cfg.Network.Intercept.Issuer == nil:
		return nil, errors.New("secrets are not available on this server (its egress does not terminate TLS)")
	}
	var out []egress.Bound
	seen := map[string]bool{}
	for _, name := range req.Secrets {
		if seen[name] {
			return nil, fmt.Errorf("secret %q is asked for twice", name)
		}
		seen[name] = true
		s, ok := pl.catalogSecret(name)
		if !ok {
			return nil, UnknownSecret(name)
		}
		if !s.Within(policy) {
			hosts := make([]string, len(s.Hosts))
			for i, h := range s.Hosts {
				hosts[i] = h.String()
			}
			return nil, fmt.Errorf("secret %q goes to %s, which the request's network allow list does not allow",
				name, strings.Join(hosts, ", "))
		}
		b, err := s.Bind()
		if err != nil {
			return nil, fmt.Errorf("secret %q cannot be used", name)
		}
		out = append(out, b)
	}
	return out, nil
}

// catalogSecret looks name up in the operator's catalog.
func (pl *Planner) catalogSecret(name string) (egress.Secret, bool) {
	if pl.cfg.Secrets == nil {
		return egress.Secret{}, false
	}
	s, ok := pl.cfg.Secrets.Secrets[name]
	return s.Secret, ok
}

// UnknownSecret is the refusal of a secret name the caller may not use,
// worded the same whether it does not exist or belongs to other keys.
func UnknownSecret(name string) error {
	return fmt.Errorf("secret %q is not defined for this API key", name)
}

// secretEnv adds NAME=placeholder for each secret to env; a request that
// sets one of those names itself is refused (it would hide the secret).
func secretEnv(env, requested []string, secrets []egress.Bound) ([]string, error) {
	for _, s := range secrets {
		for _, kv := range requested {
			if k, _, _ := strings.Cut(kv, "="); k == s.Name {
				return nil, fmt.Errorf("env sets %s, the name of a secret it asks for", s.Name)
			}
		}
		env = append(env, s.Name+"="+s.Placeholder)
	}
	return env, nil
}
