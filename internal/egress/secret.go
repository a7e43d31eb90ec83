package egress

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// redacted is what a Value shows wherever it is printed.
const redacted = "[redacted]"

// Value is a secret's value. It never prints: String, GoString, Format,
// MarshalJSON, MarshalText and LogValue all give "[redacted]", so that a
// value that reaches a log line, an error or a record by mistake shows
// nothing of itself. Only the egress reads it, to write it into a request.
type Value struct{ v string }

// NewValue wraps s.
func NewValue(s string) Value { return Value{v: s} }

// Len is the value's length in bytes.
func (v Value) Len() int { return len(v.v) }

func (Value) String() string   { return redacted }
func (Value) GoString() string { return redacted }

// Format prints "[redacted]" for every verb.
func (Value) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }

// MarshalJSON encodes "[redacted]".
func (Value) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText encodes "[redacted]".
func (Value) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue logs "[redacted]".
func (Value) LogValue() slog.Value { return slog.StringValue(redacted) }

var (
	_ fmt.Formatter  = Value{}
	_ slog.LogValuer = Value{}
)

// Secret is a credential of the operator's that the egress writes into
// requests to its hosts, in place of a placeholder the payload sends
// there: the payload never holds the value.
type Secret struct {
	Name  string // the payload's environment variable
	Value Value
	// Hosts are the destinations the value may be sent to: name rules
	// (names and wildcards, with optional ports), never addresses.
	Hosts []Rule
	// Header is the name of the field the value goes in; Prefix and
	// Suffix surround it there ("Authorization: Bearer {value}" is
	// Header "Authorization", Prefix "Bearer ").
	Header, Prefix, Suffix string
}

// For reports whether the secret may be sent to name on port.
func (s *Secret) For(name string, port uint16) bool {
	for _, r := range s.Hosts {
		if r.matchesName(name, port) {
			return true
		}
	}
	return false
}

// Bound is a secret given to one execution, with the placeholder its
// payload holds instead of the value.
type Bound struct {
	Secret
	// Placeholder is as long as the value (a response that reflects the
	// value gets the placeholder in its place without changing its
	// length, see redact.go), made of lower-case letters and digits (it
	// can be looked for in DNS names), and drawn afresh for each
	// execution.
	Placeholder string
	// forms are the value and its encoded forms (encodings.go), made
	// once at Bind: the redaction looks for each.
	forms []string
}

// patterns are the texts the redaction replaces for b: the value and its
// encoded forms.
func (b *Bound) patterns() []string {
	if b.forms == nil {
		return encodings(b.Value.v)
	}
	return b.forms
}

// placeholderAlphabet is what placeholders are made of.
const placeholderAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// Bind draws a placeholder for s.
func (s Secret) Bind() (Bound, error) {
	if s.Value.Len() == 0 {
		return Bound{}, errors.New("secret " + s.Name + " has no value")
	}
	for {
		p := randomText(s.Value.Len())
		if !strings.Contains(s.Value.v, p) {
			return Bound{Secret: s, Placeholder: p, forms: encodings(s.Value.v)}, nil
		}
	}
}

// randomText draws n characters of placeholderAlphabet.
func randomText(n int) string {
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		_, _ = rand.Read(buf[:]) // never fails (crypto/rand)
		for _, c := range buf {
			// 252 = 7 × 36: dropping the bytes above keeps the draw uniform.
			if c < 252 && len(out) < n {
				out = append(out, placeholderAlphabet[c%36])
			}
		}
	}
	return string(out)
}

// HTTPRule limits what may be asked of its hosts: a request to one of
// them must use one of Methods (any when empty) on a path that starts
// with one of Paths (any when empty). A destination with rules gets only
// what one of its rules allows.
type HTTPRule struct {
	Hosts   []Rule // name rules
	Methods []string
	Paths   []string
}

// For reports whether the rule covers name on port.
func (r *HTTPRule) For(name string, port uint16) bool {
	for _, h := range r.Hosts {
		if h.matchesName(name, port) {
			return true
		}
	}
	return false
}

// Issuer makes the certificate the egress presents to a payload for a
// name whose TLS it terminates, signed by a CA the jail trusts
// (internal/egress/tlsca).
type Issuer interface {
	Certificate(name string) (*tls.Certificate, error)
}

// Interception is what the egress needs to terminate TLS: it does so only
// for the destinations of an execution's secrets and of the operator's
// HTTP rules.
type Interception struct {
	Issuer Issuer
	// Roots verify the destinations the egress opens TLS to itself; nil:
	// the host's.
	Roots *x509.CertPool
}

// Grant is what one execution may do through its egress: its policy (the
// operator's, narrowed by the request) and its secrets.
type Grant struct {
	Policy  Policy
	Secrets []Bound
}
