package run

import (
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/egress/tlsca"
)

// TestBindSecrets: a request gets its secrets as placeholders only with
// network, on a server that terminates TLS, for names in the catalog,
// whose hosts its allow list allows; each refusal says why, none quotes
// the value.
func TestBindSecrets(t *testing.T) {
	ca, err := tlsca.New()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := egress.ParseCatalog([]byte(`{"secrets": [{"name": "GITHUB_TOKEN", "value": "ghp_theRealValue42",
		"hosts": ["api.github.com"], "header": "Authorization: Bearer {value}"}]}`), egress.OSLookup)
	if err != nil {
		t.Fatal(err)
	}
	rules := func(s ...string) []egress.Rule {
		r, err := egress.ParseRules(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	operator := egress.Policy{Allow: rules("api.github.com", "pypi.org")}
	withCA := &egress.Config{Policy: operator, Intercept: &egress.Interception{Issuer: ca}}
	pl := &Planner{cfg: Config{AllowNetwork: true, Network: withCA}}

	req := NetworkRequest{Network: true, Secrets: []string{"GITHUB_TOKEN"}}
	bound, err := pl.bindSecrets(req, operator, cat)
	if err != nil {
		t.Fatal(err)
	}
	if len(bound) != 1 || len(bound[0].Placeholder) != len("ghp_theRealValue42") || bound[0].Placeholder == "ghp_theRealValue42" {
		t.Fatalf("bound %+v", bound)
	}
	again, _ := pl.bindSecrets(req, operator, cat)
	if again[0].Placeholder == bound[0].Placeholder {
		t.Error("two executions got the same placeholder")
	}
	env, err := secretEnv(BaseEnv(), nil, bound)
	if err != nil || env[len(env)-1] != "GITHUB_TOKEN="+bound[0].Placeholder {
		t.Errorf("env %v (%v)", env, err)
	}
	if _, err := secretEnv(BaseEnv(), []string{"GITHUB_TOKEN=mine"}, bound); err == nil {
		t.Error("a request's own GITHUB_TOKEN was accepted beside the secret")
	}

	noCA := &Planner{cfg: Config{AllowNetwork: true, Network: &egress.Config{Policy: operator}}}
	for name, c := range map[string]struct {
		pl     *Planner
		req    NetworkRequest
		policy egress.Policy
		want   string
	}{
		"without network": {pl, NetworkRequest{Secrets: []string{"GITHUB_TOKEN"}}, operator, "need network"},
		"without a CA":    {noCA, req, operator, "not available on this server"},
		"unknown":         {pl, NetworkRequest{Network: true, Secrets: []string{"NOPE"}}, operator, `"NOPE" is not defined`},
		"twice":           {pl, NetworkRequest{Network: true, Secrets: []string{"GITHUB_TOKEN", "GITHUB_TOKEN"}}, operator, "twice"},
		"outside the allow list": {pl, req, operator.Narrow(rules("pypi.org")),
			"does not allow"},
	} {
		_, err := c.pl.bindSecrets(c.req, c.policy, cat)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "theRealValue") {
			t.Errorf("%s: the error quotes the value: %v", name, err)
		}
	}
}

// TestSecretKeys: a secret with a keys list is for those keys only (not
// for admin keys either); another key, no key, and a name not in the
// catalog get the same refusal, word for word, so that names of other
// keys' secrets do not show.
func TestSecretKeys(t *testing.T) {
	ca, err := tlsca.New()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := egress.ParseCatalog([]byte(`{"secrets": [
	  {"name": "ALICE_TOKEN", "value": "alice-value-1", "hosts": ["a.test"], "header": "Authorization: Bearer {value}", "keys": ["alice"]},
	  {"name": "SHARED", "value": "shared-value-1", "hosts": ["a.test"], "header": "X-Key: {value}"}]}`), egress.OSLookup)
	if err != nil {
		t.Fatal(err)
	}
	policy := egress.Policy{}
	if policy.Allow, err = egress.ParseRules([]string{"a.test"}); err != nil {
		t.Fatal(err)
	}
	pl := &Planner{cfg: Config{AllowNetwork: true, Network: &egress.Config{Policy: policy, Intercept: &egress.Interception{Issuer: ca}}}}
	for _, c := range []struct {
		caller  string
		secrets []string
		ok      bool
	}{
		{"alice", []string{"ALICE_TOKEN", "SHARED"}, true},
		{"bob", []string{"SHARED"}, true},
		{"bob", []string{"ALICE_TOKEN"}, false},
		{"", []string{"ALICE_TOKEN"}, false},
		{"alice", []string{"NOPE"}, false},
	} {
		_, err := pl.bindSecrets(NetworkRequest{Caller: c.caller, Network: true, Secrets: c.secrets}, policy, cat)
		if (err == nil) != c.ok {
			t.Errorf("%q asking for %v: %v", c.caller, c.secrets, err)
		}
	}
	_, other := pl.bindSecrets(NetworkRequest{Caller: "bob", Network: true, Secrets: []string{"ALICE_TOKEN"}}, policy, cat)
	_, unknown := pl.bindSecrets(NetworkRequest{Caller: "bob", Network: true, Secrets: []string{"ALICE_TOKEN"}}, policy, &egress.Catalog{})
	if other == nil || unknown == nil || other.Error() != unknown.Error() {
		t.Errorf("another key's secret is refused as %q, an unknown one as %q", other, unknown)
	}
}

// TestTrustMount: only a request whose egress terminates TLS (it has
// secrets, or the operator has HTTP rules) gets the trust bundle bound
// read-only outside the workspace, with Python's ssl, requests, pip and
// curl pointed at it in place of any the request set.
func TestTrustMount(t *testing.T) {
	pl := &Planner{cfg: Config{TrustBundle: "/var/lib/pyexec/egress-trust/ca-bundle.pem"}}
	rules := &egress.Catalog{Rules: []egress.HTTPRule{{Methods: []string{"GET"}}}}
	bound := []egress.Bound{{}}
	for name, c := range map[string]struct {
		req     Request
		secrets []egress.Bound
		cat     *egress.Catalog
		want    bool
	}{
		"secrets":              {Request{Network: true}, bound, &egress.Catalog{}, true},
		"http rules":           {Request{Network: true}, nil, rules, true},
		"network, no rules":    {Request{Network: true}, nil, &egress.Catalog{}, false},
		"no network":           {Request{}, nil, rules, false},
		"no bundle configured": {Request{Network: true}, bound, rules, false},
	} {
		p := pl
		if name == "no bundle configured" {
			p = &Planner{}
		}
		m := p.trustMount(c.req.Network, c.secrets, c.cat)
		if (m != nil) != c.want {
			t.Errorf("%s: mount %+v, want one: %v", name, m, c.want)
		}
		if m != nil && (m.Writable || m.Source != "/var/lib/pyexec/egress-trust" || strings.HasPrefix(m.Target, "/work")) {
			t.Errorf("%s: mount %+v", name, m)
		}
	}
	env := trustEnv([]string{"PATH=/usr/bin", "SSL_CERT_FILE=/work/mine.pem"}, pl.cfg.TrustBundle)
	want := []string{"PATH=/usr/bin", "SSL_CERT_FILE=/opt/pyexec-trust/ca-bundle.pem", "REQUESTS_CA_BUNDLE=/opt/pyexec-trust/ca-bundle.pem",
		"PIP_CERT=/opt/pyexec-trust/ca-bundle.pem", "CURL_CA_BUNDLE=/opt/pyexec-trust/ca-bundle.pem"}
	if strings.Join(env, " ") != strings.Join(want, " ") {
		t.Errorf("env %v, want %v", env, want)
	}
}
