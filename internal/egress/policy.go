package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// ErrBadRule says a policy entry does not parse.
var ErrBadRule = errors.New("invalid network rule")

// Rule is one entry of an allow or deny list: a domain name (a leading
// "*." matches any name below it, never the name itself; "*" alone any
// name), an IP address or a CIDR, optionally with a port or a port range.
type Rule struct {
	Host   string       // lower case, no trailing dot; empty for an address rule
	Prefix netip.Prefix // valid for an address rule
	Ports  [2]uint16    // inclusive; zero means every port
	text   string
}

// String is the rule as written.
func (r Rule) String() string { return r.text }

// ParseRule parses "host", "*.host", "*", "1.2.3.4", "10.0.0.0/8" or
// "[2001:db8::1]", each optionally followed by ":port" or ":lo-hi".
func ParseRule(s string) (Rule, error) {
	bad := func(why string) (Rule, error) { return Rule{}, fmt.Errorf("%w %q: %s", ErrBadRule, s, why) }
	s = strings.TrimSpace(s)
	r := Rule{text: s}
	host, ports := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return bad("unclosed [")
		}
		host, ports = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		if s[end+1:] != "" && !strings.HasPrefix(s[end+1:], ":") {
			return bad("text after ]")
		}
	case strings.Count(s, ":") == 1:
		host, ports, _ = strings.Cut(s, ":")
	}
	if ports != "" || strings.HasSuffix(s, ":") {
		lo, hi, isRange := strings.Cut(ports, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.ParseUint(lo, 10, 16)
		b, err2 := strconv.ParseUint(hi, 10, 16)
		if err1 != nil || err2 != nil || a == 0 || b < a {
			return bad("port must be 1-65535 or a range lo-hi")
		}
		r.Ports = [2]uint16{uint16(a), uint16(b)}
	}
	if host == "" {
		return bad("no host")
	}
	if p, err := netip.ParsePrefix(host); err == nil {
		r.Prefix = p.Masked()
		return r, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		r.Prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		return r, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name != "*" {
		if err := checkName(strings.TrimPrefix(name, "*.")); err != nil {
			return bad(err.Error())
		}
	}
	r.Host = name
	return r, nil
}

// checkName accepts a DNS name of letters, digits, hyphens and
// underscores in dot-separated labels.
func checkName(n string) error {
	if n == "" || len(n) > 253 {
		return errors.New("not a domain name")
	}
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("empty or overlong label")
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("character %q not allowed in a name (a wildcard only as a leading \"*.\")", c)
			}
		}
	}
	return nil
}

// ParseRules parses each entry; the error names the first bad one.
func ParseRules(entries []string) ([]Rule, error) {
	out := make([]Rule, 0, len(entries))
	for _, e := range entries {
		if strings.TrimSpace(e) == "" {
			continue
		}
		r, err := ParseRule(e)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (r Rule) portOK(port uint16) bool {
	return r.Ports[0] == 0 || port >= r.Ports[0] && port <= r.Ports[1]
}

// matchesName reports whether a name rule covers name (any port when
// port is 0: the question a DNS query asks).
func (r Rule) matchesName(name string, port uint16) bool {
	if r.Host == "" || port != 0 && !r.portOK(port) {
		return false
	}
	switch {
	case r.Host == "*":
		return true
	case strings.HasPrefix(r.Host, "*."):
		return strings.HasSuffix(name, r.Host[1:])
	}
	return name == r.Host
}

// matchesAddr reports whether an address rule covers a:port.
func (r Rule) matchesAddr(a netip.Addr, port uint16) bool {
	return r.Prefix.IsValid() && r.Prefix.Contains(a.Unmap()) && r.portOK(port)
}

// Policy decides which destinations a payload may reach. A destination is
// allowed when Allow covers it, no Deny rule covers it, and each of
// Narrowed (the request's lists) covers it too: a request can only take
// away. The always-denied ranges are checked apart (see Guard).
type Policy struct {
	Allow, Deny []Rule
	Narrowed    [][]Rule
}

// Narrow returns p with allow added as a list every destination must also
// be on.
func (p Policy) Narrow(allow []Rule) Policy {
	p.Narrowed = append(append([][]Rule(nil), p.Narrowed...), allow)
	return p
}

// Empty reports whether the policy can allow nothing.
func (p Policy) Empty() bool { return len(p.Allow) == 0 }

// NameAllowed reports whether name may be reached on port (0: on some
// port, as when it is resolved).
func (p Policy) NameAllowed(name string, port uint16) bool {
	for _, r := range p.Deny {
		// A deny rule with a port denies that port only; asked for any
		// port, it leaves the name resolvable.
		if r.matchesName(name, port) && (port != 0 || r.Ports[0] == 0) {
			return false
		}
	}
	return p.onEveryList(func(r Rule) bool { return r.matchesName(name, port) })
}

// AddrAllowed reports whether an IP literal may be reached on port: only
// address rules count.
func (p Policy) AddrAllowed(a netip.Addr, port uint16) bool {
	if p.AddrDenied(a, port) {
		return false
	}
	return p.onEveryList(func(r Rule) bool { return r.matchesAddr(a, port) })
}

// onEveryList reports whether a rule of Allow and a rule of each of
// Narrowed match.
func (p Policy) onEveryList(match func(Rule) bool) bool {
	for _, rules := range append([][]Rule{p.Allow}, p.Narrowed...) {
		if !slices.ContainsFunc(rules, match) {
			return false
		}
	}
	return true
}

// AddrDenied reports whether a deny rule covers a:port; it also applies to
// the addresses an allowed name resolves to.
func (p Policy) AddrDenied(a netip.Addr, port uint16) bool {
	for _, r := range p.Deny {
		if r.matchesAddr(a, port) {
			return true
		}
	}
	return false
}
