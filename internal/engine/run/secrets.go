package run

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// bindSecrets checks the secrets req asks for in cat (the operator's
// catalog as the plan sees it) and binds each to a fresh placeholder:
// network must be on, the server must terminate TLS, each name must be in
// the catalog for req's caller (a secret with a keys list is for those
// API keys only, admin keys too; another key is told it is not defined,
// exactly as for an unknown name), and each secret's hosts must be within
// the request's policy. It runs on every Prepare, so a queued request is
// checked again against the catalog when it runs. Any of these failing
// refuses the execution: a secret that cannot be applied is never
// silently left out.
func (pl *Planner) bindSecrets(req NetworkRequest, policy egress.Policy, cat *egress.Catalog) ([]egress.Bound, error) {
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
		s, ok := cat.Secrets[name]
		if !ok || s.Keys != nil && (req.Caller == "" || !slices.Contains(s.Keys, req.Caller)) {
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

// trustMount is the read-only bind of the trust bundle for a request
// whose egress terminates TLS (it has secrets, or the catalog has HTTP
// rules), nil for any other: a jail trusts the egress CA only when its
// egress uses it.
func (pl *Planner) trustMount(network bool, secrets []egress.Bound, cat *egress.Catalog) *sandbox.Mount {
	if pl.cfg.TrustBundle == "" || !network || len(secrets) == 0 && len(cat.Rules) == 0 {
		return nil
	}
	return &sandbox.Mount{Source: filepath.Dir(pl.cfg.TrustBundle), Target: trustDir}
}

// trustDir is where the trust bundle's directory is bound in a jail:
// outside the workspace, read-only.
const trustDir = "/opt/pyexec-trust"

// trustVars are the variables Python's ssl (OpenSSL), requests, pip and
// curl read their trusted roots from.
var trustVars = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE"}

// trustEnv points trustVars at the bundle as the jail sees it, in place
// of any the request set: a TLS-terminating egress is reached only by
// trusting its CA.
func trustEnv(env []string, bundle string) []string {
	bundle = trustDir + "/" + filepath.Base(bundle)
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(trustVars, k) {
			out = append(out, kv)
		}
	}
	for _, k := range trustVars {
		out = append(out, k+"="+bundle)
	}
	return out
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
