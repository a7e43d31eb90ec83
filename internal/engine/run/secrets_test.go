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
	pl := &Planner{cfg: Config{AllowNetwork: true, Network: withCA, Secrets: cat}}

	req := Request{Network: true, Secrets: []string{"GITHUB_TOKEN"}}
	bound, err := pl.bindSecrets(req, operator)
	if err != nil {
		t.Fatal(err)
	}
	if len(bound) != 1 || len(bound[0].Placeholder) != len("ghp_theRealValue42") || bound[0].Placeholder == "ghp_theRealValue42" {
		t.Fatalf("bound %+v", bound)
	}
	again, _ := pl.bindSecrets(req, operator)
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

	noCA := &Planner{cfg: Config{AllowNetwork: true, Network: &egress.Config{Policy: operator}, Secrets: cat}}
	for name, c := range map[string]struct {
		pl     *Planner
		req    Request
		policy egress.Policy
		want   string
	}{
		"without network": {pl, Request{Secrets: []string{"GITHUB_TOKEN"}}, operator, "need network"},
		"without a CA":    {noCA, req, operator, "not available on this server"},
		"unknown":         {pl, Request{Network: true, Secrets: []string{"NOPE"}}, operator, `"NOPE" is not defined`},
		"twice":           {pl, Request{Network: true, Secrets: []string{"GITHUB_TOKEN", "GITHUB_TOKEN"}}, operator, "twice"},
		"outside the allow list": {pl, req, operator.Narrow(rules("pypi.org")),
			"does not allow"},
	} {
		_, err := c.pl.bindSecrets(c.req, c.policy)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "theRealValue") {
			t.Errorf("%s: the error quotes the value: %v", name, err)
		}
	}
}
