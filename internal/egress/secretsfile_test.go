package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// fakeLookup serves "env:" and "file:" values without the server's own.
var fakeLookup = Lookup{
	Env: func(k string) (string, bool) {
		v, ok := map[string]string{"GH_TOKEN": "ghp_fromTheEnvironment1", "BAD": "line\r\nX-Injected: 1"}[k]
		return v, ok
	},
	ReadFile: func(p string) ([]byte, error) {
		if p == "/run/token" {
			return []byte("fromAFile-0123456789\n"), nil
		}
		return nil, os.ErrNotExist
	},
}

// TestParseCatalog: the example reads as written; values come
// inline, from the environment or from a file; hosts without a port mean
// 443.
func TestParseCatalog(t *testing.T) {
	c, err := ParseCatalog([]byte(`{"secrets": [
	  {"name": "GITHUB_TOKEN", "value": "env:GH_TOKEN", "hosts": ["api.github.com"],
	   "header": "Authorization: Bearer {value}", "keys": ["alice"]},
	  {"name": "FILE_TOKEN", "value": "file:/run/token", "hosts": ["api.example.test:8443"], "header": "X-Api-Key: {value}"},
	  {"name": "INLINE", "value": "inline-value-1234", "hosts": ["a.test", "b.test:443"], "header": "Authorization: token {value}!"}],
	 "http_rules": [{"hosts": ["api.github.com"], "methods": ["GET"], "paths": ["/repos/"]}]}`), fakeLookup)
	if err != nil {
		t.Fatal(err)
	}
	gh := c.Secrets["GITHUB_TOKEN"]
	if gh.Value.v != "ghp_fromTheEnvironment1" || gh.Header != "Authorization" || gh.Prefix != "Bearer " || gh.Suffix != "" ||
		len(gh.Keys) != 1 || gh.Keys[0] != "alice" || !gh.For("api.github.com", 443) || gh.For("api.github.com", 80) {
		t.Errorf("GITHUB_TOKEN read as %+v (keys %v)", gh.Secret, gh.Keys)
	}
	if f := c.Secrets["FILE_TOKEN"]; f.Value.v != "fromAFile-0123456789" || f.Keys != nil || !f.For("api.example.test", 8443) {
		t.Errorf("FILE_TOKEN read as %+v", f.Secret)
	}
	if in := c.Secrets["INLINE"]; in.Suffix != "!" || !in.For("a.test", 443) || !in.For("b.test", 443) {
		t.Errorf("INLINE read as %+v", in.Secret)
	}
	if len(c.Rules) != 1 || c.Rules[0].Methods[0] != "GET" || !c.Rules[0].For("api.github.com", 443) {
		t.Errorf("rules read as %+v", c.Rules)
	}
	// The value shows nowhere it is printed.
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%+v %#v %s %q %x", gh, gh, gh.Value, gh.Value, gh.Value), mustJSON(t, c)} {
		if strings.Contains(out, "fromTheEnvironment") || strings.Contains(out, "fromAFile") || strings.Contains(out, "inline-value") {
			t.Errorf("a value is printed: %s", out)
		}
	}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "secret", gh.Value)
	if strings.Contains(logged.String(), "fromTheEnvironment") {
		t.Errorf("a value is logged: %s", logged.String())
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParseCatalogRefuses: what cannot be applied safely is refused, and
// no refusal quotes a value.
func TestParseCatalogRefuses(t *testing.T) {
	// An unquoted inline value: json's message would quote its first
	// byte; only the offset is told.
	if _, err := ParseCatalog([]byte(`{"secrets": [{"name": "T", "value": Zsecret-value-1}]}`), fakeLookup); err == nil ||
		strings.Contains(err.Error(), "Z") || !strings.Contains(err.Error(), "at byte") {
		t.Errorf("a syntax error in a value: %v", err)
	}
	secret := func(fields string) string { return `{"secrets": [{` + fields + `}]}` }
	ok := `"name": "T", "value": "secret-value-1", "hosts": ["a.test"], "header": "Authorization: Bearer {value}"`
	for name, file := range map[string]string{
		"unknown field":       secret(ok + `, "host": ["b.test"]`),
		"bad name":            secret(strings.Replace(ok, `"T"`, `"A-B"`, 1)),
		"twice":               `{"secrets": [{` + ok + `}, {` + ok + `}]}`,
		"short value":         secret(strings.Replace(ok, "secret-value-1", "short", 1)),
		"CRLF in value":       secret(strings.Replace(ok, "secret-value-1", `secret-value-1\r\nX-Injected: 1`, 1)),
		"CRLF from env":       secret(strings.Replace(ok, "secret-value-1", "env:BAD", 1)),
		"unset env":           secret(strings.Replace(ok, "secret-value-1", "env:NOPE", 1)),
		"missing file":        secret(strings.Replace(ok, "secret-value-1", "file:/nope", 1)),
		"non-ASCII value":     secret(strings.Replace(ok, "secret-value-1", "secret-välue-1", 1)),
		"no hosts":            secret(strings.Replace(ok, `["a.test"]`, `[]`, 1)),
		"address host":        secret(strings.Replace(ok, `["a.test"]`, `["203.0.113.7"]`, 1)),
		"wildcard host":       secret(strings.Replace(ok, `["a.test"]`, `["*.a.test"]`, 1)),
		"every host":          secret(strings.Replace(ok, `["a.test"]`, `["*"]`, 1)),
		"port range":          secret(strings.Replace(ok, `["a.test"]`, `["a.test:443-444"]`, 1)),
		"no {value}":          secret(strings.Replace(ok, "{value}", "", 1)),
		"{value} twice":       secret(strings.Replace(ok, "{value}", "{value}{value}", 1)),
		"no field name":       secret(strings.Replace(ok, "Authorization: ", "", 1)),
		"Host field":          secret(strings.Replace(ok, "Authorization", "Host", 1)),
		"Content-Length":      secret(strings.Replace(ok, "Authorization", "content-length", 1)),
		"empty keys":          secret(ok + `, "keys": []`),
		"rule without hosts":  `{"http_rules": [{"methods": ["GET"]}]}`,
		"rule on address":     `{"http_rules": [{"hosts": ["203.0.113.7"]}]}`,
		"lower-case method":   `{"http_rules": [{"hosts": ["a.test"], "methods": ["get"]}]}`,
		"relative path":       `{"http_rules": [{"hosts": ["a.test"], "paths": ["repos/"]}]}`,
		"dot segment in path": `{"http_rules": [{"hosts": ["a.test"], "paths": ["/repos/../"]}]}`,
		"reserved name":       secret(strings.Replace(ok, `"T"`, `"SSL_CERT_FILE"`, 1)),
		"linker variable":     secret(strings.Replace(ok, `"T"`, `"LD_PRELOAD"`, 1)),
		"Python variable":     secret(strings.Replace(ok, `"T"`, `"PYTHONPATH"`, 1)),
	} {
		_, err := ParseCatalog([]byte(file), fakeLookup)
		switch {
		case err == nil:
			t.Errorf("%s: accepted", name)
		case !errors.Is(err, ErrSecretsFile):
			t.Errorf("%s: %v is not ErrSecretsFile", name, err)
		case strings.Contains(err.Error(), "secret-value") || strings.Contains(err.Error(), "Injected") ||
			strings.Contains(err.Error(), "short") && name != "short value" || strings.Contains(err.Error(), "välue"):
			t.Errorf("%s: the refusal quotes the value: %v", name, err)
		}
	}
}

// TestSecretWithin: a secret may be used only where the request's narrowed
// policy lets it go.
func TestSecretWithin(t *testing.T) {
	rules := func(s ...string) []Rule {
		r, err := ParseRules(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	s := Secret{Hosts: rules("api.test:443")}
	for _, c := range []struct {
		p    Policy
		want bool
	}{
		{Policy{Allow: rules("api.test")}, true},
		{Policy{Allow: rules("*.test")}, true},
		{Policy{Allow: rules("api.test:80")}, false},
		{Policy{Allow: rules("other.test")}, false},
		{Policy{Allow: rules("api.test")}.Narrow(rules("other.test")), false},
		{Policy{Allow: rules("api.test"), Deny: rules("api.test:443")}, false},
	} {
		if got := s.Within(c.p); got != c.want {
			t.Errorf("within %+v: %v, want %v", c.p, got, c.want)
		}
	}
}
