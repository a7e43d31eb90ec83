package egress

import (
	"slices"
	"strings"
)

// ruleVerdict tells whether the operator's HTTP rules let method and
// target through to name on port: ok when no rule covers the destination,
// or one that covers it allows both. A target whose path a server might
// read as another path (dot segments, encoded dots, slashes or
// backslashes) is refused wherever rules apply: a prefix compared as
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
	path, clean := requestPath(target)
	if !clean {
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

// requestPath is the path of a request target (origin-form or
// absolute-form; "*" for the asterisk form), without its query; clean is
// false when a server could take it for another path: a "." or ".."
// segment (also before a ';' parameter), a percent-encoded '.', '/' or
// '\', a backslash, or a NUL.
func requestPath(target string) (path string, clean bool) {
	if i := strings.Index(target, "://"); i >= 0 {
		rest := target[i+3:]
		j := strings.IndexAny(rest, "/?")
		switch {
		case j < 0:
			target = "/"
		case rest[j] == '?':
			target = "/" + rest[j:]
		default:
			target = rest[j:]
		}
	}
	path, _, _ = strings.Cut(target, "?")
	if path == "*" {
		return path, true
	}
	lower := strings.ToLower(path)
	if strings.ContainsAny(path, "\\\x00") || strings.Contains(lower, "%2e") || strings.Contains(lower, "%2f") ||
		strings.Contains(lower, "%5c") || strings.Contains(lower, "%00") {
		return path, false
	}
	for _, seg := range strings.Split(path, "/") {
		seg, _, _ = strings.Cut(seg, ";")
		if seg == "." || seg == ".." {
			return path, false
		}
	}
	return path, true
}

// eventPath is a request's path as an event shows it: without the query
// (which may carry what the caller would rather not keep), at most
// maxEventPath bytes.
func eventPath(target string) string {
	p, _ := requestPath(target)
	if len(p) > maxEventPath {
		p = p[:maxEventPath]
	}
	return p
}

// maxEventPath bounds the path an event carries.
const maxEventPath = 256
