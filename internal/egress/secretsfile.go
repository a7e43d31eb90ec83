package egress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
)

// Catalog is the operator's secrets file (--secrets-file): the secrets
// executions may ask for by name, and the HTTP rules of the destinations
// whose TLS the egress terminates.
type Catalog struct {
	Secrets map[string]CatalogSecret
	Rules   []HTTPRule
}

// CatalogSecret is a secret with the API keys that may use it.
type CatalogSecret struct {
	Secret
	// Keys are the names of the API keys that may ask for it; nil: every
	// key.
	Keys []string
}

// ErrSecretsFile wraps every refusal of a secrets file. Its messages name
// the secret and the field, never a value.
var ErrSecretsFile = errors.New("secrets file")

// secretsFile is the file's JSON.
type secretsFile struct {
	Secrets []struct {
		Name   string    `json:"name"`
		Value  string    `json:"value"`
		Hosts  []string  `json:"hosts"`
		Header string    `json:"header"`
		Keys   *[]string `json:"keys"`
	} `json:"secrets"`
	HTTPRules []struct {
		Hosts   []string `json:"hosts"`
		Methods []string `json:"methods"`
		Paths   []string `json:"paths"`
	} `json:"http_rules"`
}

// Lookup is where a secret's "env:" and "file:" values come from.
type Lookup struct {
	Env      func(string) (string, bool)
	ReadFile func(string) ([]byte, error)
}

// OSLookup reads the server's environment and files.
var OSLookup = Lookup{Env: os.LookupEnv, ReadFile: os.ReadFile}

// minValueLen is the shortest value taken: a response is searched for the
// value to redact it, and a short one would be found in ordinary text.
const minValueLen = 8

var (
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	tokenName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// reservedName reports whether a secret's name (its environment
// variable in the jail) would replace one the jail, the interpreter, the
// dynamic linker or TLS clients read: the placeholder would take its place.
func reservedName(name string) bool {
	switch strings.ToUpper(name) {
	case "PATH", "HOME", "LANG", "TMPDIR", "SHELL", "USER", "PWD", "TERM", "SSL_CERT_FILE", "SSL_CERT_DIR",
		"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS", "HTTP_PROXY", "HTTPS_PROXY",
		"NO_PROXY", "ALL_PROXY", "XDG_CACHE_HOME":
		return true
	}
	upper := strings.ToUpper(name)
	return strings.HasPrefix(upper, "LD_") || strings.HasPrefix(upper, "PYTHON") || strings.HasPrefix(upper, "PYEXEC_")
}

// framingFields are the fields a secret may not go in: they decide where
// a request ends, where it goes, or what the connection becomes.
var framingFields = map[string]bool{"host": true, "content-length": true, "transfer-encoding": true,
	"connection": true, "te": true, "trailer": true, "upgrade": true, "expect": true, "keep-alive": true,
	"proxy-connection": true}

// ParseCatalog reads a secrets file. Unknown fields are refused (a typo
// would otherwise drop a restriction), and so is every value that could
// not be written into a header as it is.
func ParseCatalog(data []byte, look Lookup) (*Catalog, error) {
	bad := func(format string, args ...any) (*Catalog, error) {
		return nil, fmt.Errorf("%w: %s", ErrSecretsFile, fmt.Sprintf(format, args...))
	}
	var f secretsFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		// A syntax error's message quotes the character it stopped at,
		// which may be a byte of an inline value: only its offset is
		// told. Type errors name the field, unknown fields their name.
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return bad("not JSON (at byte %d)", syn.Offset)
		}
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return bad("field %s is not a %s", typ.Field, typ.Type)
		}
		return bad("%v", err)
	}
	c := &Catalog{Secrets: map[string]CatalogSecret{}}
	for i, s := range f.Secrets {
		if !envName.MatchString(s.Name) {
			return bad("secret %d: name %q is not an environment variable name", i+1, s.Name)
		}
		if reservedName(s.Name) {
			return bad("secret %s: the name is a variable the jail, Python or TLS clients rely on", s.Name)
		}
		if _, dup := c.Secrets[s.Name]; dup {
			return bad("secret %s is defined twice", s.Name)
		}
		v, err := secretValue(s.Value, look)
		if err != nil {
			return bad("secret %s: value: %v", s.Name, err)
		}
		hosts, err := secretHosts(s.Hosts)
		if err != nil {
			return bad("secret %s: hosts: %v", s.Name, err)
		}
		sec := Secret{Name: s.Name, Value: v, Hosts: hosts}
		if sec.Header, sec.Prefix, sec.Suffix, err = parseTemplate(s.Header); err != nil {
			return bad("secret %s: header: %v", s.Name, err)
		}
		entry := CatalogSecret{Secret: sec}
		if s.Keys != nil {
			if len(*s.Keys) == 0 {
				return bad("secret %s: an empty keys list (leave it out for every key)", s.Name)
			}
			for _, k := range *s.Keys {
				if k == "" {
					return bad("secret %s: an empty key name", s.Name)
				}
			}
			entry.Keys = append([]string{}, *s.Keys...)
		}
		c.Secrets[s.Name] = entry
	}
	for i, r := range f.HTTPRules {
		rule, err := parseHTTPRule(r.Hosts, r.Methods, r.Paths)
		if err != nil {
			return bad("http rule %d: %v", i+1, err)
		}
		c.Rules = append(c.Rules, rule)
	}
	return c, nil
}

// secretValue reads a value written inline, as "env:VAR" or as
// "file:PATH" (one trailing newline dropped). A value must be at least
// minValueLen bytes of visible ASCII and spaces, without a space at
// either end (it is written into a header field as it is).
func secretValue(s string, look Lookup) (Value, error) {
	v := s
	switch {
	case strings.HasPrefix(s, "env:"):
		var ok bool
		if v, ok = look.Env(s[len("env:"):]); !ok {
			return Value{}, fmt.Errorf("environment variable %s is not set", s[len("env:"):])
		}
	case strings.HasPrefix(s, "file:"):
		b, err := look.ReadFile(s[len("file:"):])
		if err != nil {
			return Value{}, fmt.Errorf("reading %s failed", s[len("file:"):]) // not err: it could quote content
		}
		v = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	}
	if len(v) < minValueLen {
		return Value{}, fmt.Errorf("shorter than %d bytes", minValueLen)
	}
	for _, c := range []byte(v) {
		if c < 0x20 || c > 0x7e {
			return Value{}, errors.New("holds a byte that is not visible ASCII or a space")
		}
	}
	if v[0] == ' ' || v[len(v)-1] == ' ' {
		return Value{}, errors.New("begins or ends with a space")
	}
	return NewValue(v), nil
}

// secretHosts parses a secret's hosts: exact names (a wildcard would let
// a payload send the value to any name below it), each with one port or
// none, which means 443 (the value is only ever written over TLS).
func secretHosts(entries []string) ([]Rule, error) {
	if len(entries) == 0 {
		return nil, errors.New("none (a secret needs the names it may be sent to)")
	}
	rules, err := ParseRules(entries)
	if err != nil {
		return nil, err
	}
	for i, r := range rules {
		switch {
		case r.Host == "":
			return nil, fmt.Errorf("%q is an address: a secret goes to names only", r.text)
		case strings.Contains(r.Host, "*"):
			return nil, fmt.Errorf("%q is a wildcard: a secret goes to exact names only", r.text)
		case r.Ports[0] != r.Ports[1]:
			return nil, fmt.Errorf("%q has a port range: give one port", r.text)
		case r.Ports[0] == 0:
			rules[i].Ports = [2]uint16{443, 443}
		}
	}
	return rules, nil
}

// parseTemplate reads "Name: prefix{value}suffix".
func parseTemplate(t string) (name, prefix, suffix string, err error) {
	name, rest, ok := strings.Cut(t, ":")
	if !ok || !tokenName.MatchString(name) {
		return "", "", "", errors.New(`not "Field-Name: ...{value}..."`)
	}
	if framingFields[strings.ToLower(name)] {
		return "", "", "", fmt.Errorf("a secret may not go in %s", name)
	}
	rest = strings.TrimLeft(rest, " ")
	if strings.Count(rest, "{value}") != 1 {
		return "", "", "", errors.New("needs {value} exactly once")
	}
	prefix, suffix, _ = strings.Cut(rest, "{value}")
	for _, c := range []byte(prefix + suffix) {
		if c < 0x20 || c > 0x7e {
			return "", "", "", errors.New("holds a byte that is not visible ASCII or a space")
		}
	}
	if strings.HasSuffix(suffix, " ") {
		return "", "", "", errors.New("ends with a space")
	}
	return name, prefix, suffix, nil
}

// parseHTTPRule reads one HTTP rule: name rules (wildcards allowed: a rule
// only takes away), methods as tokens, paths as prefixes starting with /.
func parseHTTPRule(hosts, methods, paths []string) (HTTPRule, error) {
	if len(hosts) == 0 {
		return HTTPRule{}, errors.New("no hosts")
	}
	rules, err := ParseRules(hosts)
	if err != nil {
		return HTTPRule{}, err
	}
	for _, r := range rules {
		if r.Host == "" {
			return HTTPRule{}, fmt.Errorf("%q is an address: HTTP rules name hosts", r.text)
		}
	}
	for _, m := range methods {
		if !tokenName.MatchString(m) || m != strings.ToUpper(m) {
			return HTTPRule{}, fmt.Errorf("method %q is not an upper-case token", m)
		}
	}
	for _, p := range paths {
		if !strings.HasPrefix(p, "/") || !cleanPath(p) || strings.ContainsAny(p, "?#") {
			return HTTPRule{}, fmt.Errorf("path %q is not a plain path prefix starting with /", p)
		}
	}
	return HTTPRule{Hosts: rules, Methods: methods, Paths: paths}, nil
}

// Within reports whether every destination of s is allowed by p: a
// request may use a secret only where its own allow list lets it go.
func (s *Secret) Within(p Policy) bool {
	for _, r := range s.Hosts {
		if !p.NameAllowed(r.Host, r.Ports[0]) {
			return false
		}
	}
	return true
}

// LiveCatalog is the operator's secrets file as last loaded: its secrets
// and its HTTP rules are replaced together (a reload swaps one pointer),
// so that an execution planned from one Load sees one file, never half
// of two.
type LiveCatalog struct{ p atomic.Pointer[Catalog] }

// NewLiveCatalog holds c (nil: an empty catalog).
func NewLiveCatalog(c *Catalog) *LiveCatalog {
	l := &LiveCatalog{}
	l.Store(c)
	return l
}

// Load returns the catalog as it is now, never nil (also on a nil l).
func (l *LiveCatalog) Load() *Catalog {
	if l == nil {
		return &Catalog{}
	}
	if c := l.p.Load(); c != nil {
		return c
	}
	return &Catalog{}
}

// Store replaces the catalog (nil: an empty one).
func (l *LiveCatalog) Store(c *Catalog) {
	if c == nil {
		c = &Catalog{}
	}
	l.p.Store(c)
}
