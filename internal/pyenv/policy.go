package pyenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/pyenv/detect"
)

// ErrPolicy marks a request refused by a policy rule (a 400 naming the
// rule). Policy rules are a teaching and hygiene tool evaluated on the
// source; they are not a security boundary — the jail is.
var ErrPolicy = errors.New("refused by policy")

// Action is what a matching policy rule does.
type Action string

// Policy actions.
const (
	Deny Action = "deny" // the request is refused
	Warn Action = "warn" // the run goes ahead with a warning on the result
)

// Rule matches imports and calls by dotted name. A name matches itself and
// everything below it: "subprocess" matches `import subprocess.x` and the
// call "subprocess.run"; "os.system" matches only that call.
type Rule struct {
	Name    string   `json:"name"`
	Action  Action   `json:"action"`
	Imports []string `json:"imports,omitempty"`
	Calls   []string `json:"calls,omitempty"` // e.g. "eval", "os.system", "subprocess"
	// Message is shown with every match; empty means a generic one.
	Message string `json:"message,omitempty"`
}

// Policy is an ordered list of rules.
type Policy struct {
	Rules []Rule `json:"rules"`
}

// Validate checks the rules once, at startup.
func (p Policy) Validate() error {
	seen := map[string]bool{}
	for i, r := range p.Rules {
		switch {
		case r.Name == "":
			return fmt.Errorf("policy rule %d has no name", i+1)
		case seen[r.Name]:
			return fmt.Errorf("policy rule %q is defined twice", r.Name)
		case r.Action != Deny && r.Action != Warn:
			return fmt.Errorf("policy rule %q: action %q is neither deny nor warn", r.Name, r.Action)
		case len(r.Imports) == 0 && len(r.Calls) == 0:
			return fmt.Errorf("policy rule %q matches nothing", r.Name)
		}
		seen[r.Name] = true
	}
	return nil
}

// ParsePolicy reads a policy file: a JSON object {"rules": [Rule...]}
// whose unknown fields are errors (a misspelt "imports" would otherwise
// silently match nothing). The rules are validated.
func ParsePolicy(data []byte) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	if dec.More() {
		return Policy{}, errors.New("policy: trailing data after the JSON object")
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// PolicyError is a request refused by a rule; its message names the rule
// and where it matched.
type PolicyError struct {
	Rule    string
	Where   string // "main.py:3"
	What    string // "import of subprocess" or "call of os.system"
	Message string
}

func (e *PolicyError) Error() string {
	s := fmt.Sprintf("policy rule %q: %s at %s is not allowed", e.Rule, e.What, e.Where)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Unwrap makes errors.Is(err, ErrPolicy) hold.
func (e *PolicyError) Unwrap() error { return ErrPolicy }

// Check evaluates the rules on every import (the standard library's
// included) and call of the project. The first deny match is returned as
// a *PolicyError; warn matches come back as messages, one per rule and
// place.
func (p Policy) Check(imports []detect.Import, calls []detect.Call) ([]string, error) {
	var warnings []string
	for _, r := range p.Rules {
		var hits []PolicyError
		for _, im := range imports {
			if matchesAny(im.Module, r.Imports) {
				hits = append(hits, PolicyError{Rule: r.Name, Where: fmt.Sprintf("%s:%d", im.File, im.Line), What: "import of " + im.Module, Message: r.Message})
			}
		}
		for _, c := range calls {
			if matchesAny(c.Name, r.Calls) {
				hits = append(hits, PolicyError{Rule: r.Name, Where: fmt.Sprintf("%s:%d", c.File, c.Line), What: "call of " + c.Name, Message: r.Message})
			}
		}
		for i := range hits {
			if r.Action == Deny {
				return nil, &hits[i]
			}
			w := fmt.Sprintf("policy rule %q: %s at %s", r.Name, hits[i].What, hits[i].Where)
			if r.Message != "" {
				w += ": " + r.Message
			}
			warnings = append(warnings, w)
		}
	}
	return warnings, nil
}

// readsCalls reports whether a rule matches calls, which detection then
// has to find.
func (p Policy) readsCalls() bool {
	for _, r := range p.Rules {
		if len(r.Calls) > 0 {
			return true
		}
	}
	return false
}

func matchesAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if name == p || strings.HasPrefix(name, p+".") {
			return true
		}
	}
	return false
}
