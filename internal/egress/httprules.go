package egress

import (
	"slices"
	"strconv"
	"strings"
)

// ruleVerdict tells whether the operator's HTTP rules let method and
// target through to name on port: ok when no rule covers the destination,
// or one that covers it allows both. A target whose form is not one a
// rule can be checked against (targetPath), or whose path a server might
// read as another path (dot segments, encoded dots, slashes or
// backslashes), is refused wherever rules apply: a prefix compared as
// written would say nothing of the path served.
func ruleVerdict(rules []HTTPRule, name string, port uint16, method, target string) (ok bool) {
	var covering []*HTTPRule
	for i := range rules {
		if rules[i].For(name, port) {
			covering = append(covering, &rules[i])
		}
	}
	if len(covering) == 0 {
		return true
	}
	path, ok := targetPath(method, target, name, port)
	if !ok {
		return false
	}
	if !cleanPath(path) {
		return false
	}
	for _, r := range covering {
		if (len(r.Methods) == 0 || slices.Contains(r.Methods, method)) && pathAllowed(r.Paths, path) {
			return true
		}
	}
	return false
}

// pathAllowed reports whether path starts with one of prefixes (any
// path when there are none).
func pathAllowed(prefixes []string, path string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// targetPath is the path (without the query) of a request target sent
// to name on port, taken by the target's form (RFC 9112 §3.2), never by
// searching it: origin-form starts with '/' and is the path itself;
// absolute-form starts with "http://" or "https://" and an authority that
// must be name (alone or with port), the path following it ("/" when
// there is none); asterisk-form ("*") is only OPTIONS's. Anything else
// (authority-form, another scheme, another host, a target a server would
// read otherwise) is not ok.
func targetPath(method, target, name string, port uint16) (path string, ok bool) {
	switch {
	case strings.HasPrefix(target, "/"):
		path = target
	case target == "*":
		return target, method == "OPTIONS"
	default:
		lower := strings.ToLower(target)
		var rest string
		switch {
		case strings.HasPrefix(lower, "http://"):
			rest = target[len("http://"):]
		case strings.HasPrefix(lower, "https://"):
			rest = target[len("https://"):]
		default:
			return "", false
		}
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		authority := strings.ToLower(rest[:end])
		if authority != name && authority != name+":"+strconv.Itoa(int(port)) {
			return "", false
		}
		path = rest[end:]
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
	}
	path, _, _ = strings.Cut(path, "?")
	return path, true
}

// cleanPath reports whether a server could not take path for another
// path: it is false for a "." or ".." segment (also before a
// ';' parameter), a percent-encoded '.', '/', '\' or '%' (which a server
// that decodes twice would read as one of them), an overlong UTF-8 lead
// byte (%c0, %c1, %e0%80, %f0%80: old decoders read "%c0%ae" as '.'), a
// backslash, or a NUL.
func cleanPath(path string) bool {
	lower := strings.ToLower(path)
	if strings.ContainsAny(path, "\\\x00") {
		return false
	}
	for _, enc := range []string{"%2e", "%2f", "%5c", "%00", "%25", "%c0", "%c1", "%e0%80", "%f0%80"} {
		if strings.Contains(lower, enc) {
			return false
		}
	}
	for _, seg := range strings.Split(path, "/") {
		seg, _, _ = strings.Cut(seg, ";")
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// eventPath is a request's path as an event shows it: without the query
// (which may carry what the caller would rather not keep), at most
// maxEventPath bytes.
func eventPath(method, target, name string, port uint16) string {
	p, ok := targetPath(method, target, name, port)
	if !ok {
		p = "(unreadable target)"
	}
	if len(p) > maxEventPath {
		p = p[:maxEventPath]
	}
	return p
}

// maxEventPath bounds the path an event carries.
const maxEventPath = 256
