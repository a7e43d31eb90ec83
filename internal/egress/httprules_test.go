package egress

import "testing"

// TestRuleTargets: with a rule that allows GET and DELETE under /repos/ on
// api.test, a request reaches the destination only when the path the
// server will serve is under /repos/; every way of making the target say
// another path than the one served (a scheme in the query or the path of
// an origin-form target, an absolute-form target for another host, forms
// a rule cannot be checked against) is refused.
func TestRuleTargets(t *testing.T) {
	hosts, err := ParseRules([]string{"api.test"})
	if err != nil {
		t.Fatal(err)
	}
	rules := []HTTPRule{{Hosts: hosts, Methods: []string{"GET", "DELETE", "OPTIONS"}, Paths: []string{"/repos/"}}}
	for _, c := range []struct {
		method, target string
		ok             bool
	}{
		{"GET", "/repos/a/b", true},
		{"GET", "/repos/a/b?next=/admin", true},
		{"GET", "https://api.test/repos/a", true},
		{"GET", "HTTPS://API.TEST:443/repos/a", true},
		{"GET", "/repos/%3A//x", true},
		// H1: a scheme in the query or the path of an origin-form target.
		{"DELETE", "/user/keys/123?x=https://a/repos/", false},
		{"DELETE", "/admin://x/repos/", false},
		{"GET", "/admin?next=https://api.test/repos/", false},
		// Absolute-form naming another host, or this one on another port.
		{"GET", "https://other.test/repos/a", false},
		{"GET", "https://api.test:8443/repos/a", false},
		{"GET", "https://api.test.evil/repos/a", false},
		{"GET", "http://api.test@evil/repos/a", false},
		// Other forms and schemes.
		{"GET", "ftp://api.test/repos/a", false},
		{"GET", "api.test:443", false},
		{"GET", "*", false},
		{"OPTIONS", "*", false}, // "*" is not under /repos/
		{"GET", "repos/a", false},
		// Paths a server may serve as another.
		{"GET", "/repos/../admin", false},
		{"GET", "/repos/%2e%2e/admin", false},
		{"GET", "/repos/..;/admin", false},
		{"GET", "https://api.test/repos/%2F../admin", false},
		// Double encoding, overlong UTF-8.
		{"GET", "/repos/%252e%252e/admin", false},
		{"GET", "/repos/%c0%ae%c0%ae/admin", false},
		{"GET", "/repos/%C1%9C/admin", false},
		{"GET", "/repos/%e0%80%ae%e0%80%ae/admin", false},
		{"GET", "/repos/caf%C3%A9", true},
	} {
		if got := ruleVerdict(rules, "api.test", 443, c.method, c.target); got != c.ok {
			t.Errorf("%s %s: allowed %v, want %v", c.method, c.target, got, c.ok)
		}
	}
	// Events show the path the server serves, never one read from the
	// query.
	if p := eventPath("DELETE", "/user/keys/123?x=https://a/repos/", "api.test", 443); p != "/user/keys/123" {
		t.Errorf("event path %q, want /user/keys/123", p)
	}
	// A destination no rule covers is not the rules' business.
	if !ruleVerdict(rules, "other.test", 443, "DELETE", "/admin") {
		t.Error("a destination without rules was refused")
	}
}

// TestOverrideScan: "_method" in a request's content is found in any case,
// percent-encoded, and split across writes, before the write that
// completes it is let through; content without it passes whole.
func TestOverrideScan(t *testing.T) {
	for _, parts := range [][]string{
		{"a=1&_method=DELETE"},
		{"a=1&_MeThOd=DELETE"},
		{"a=1&%5Fmethod=DELETE"},
		{`{"_method": "DELETE"}`},
		{"a=1&_me", "thod=DELETE"},
		{"a=1&%5", "fmeth", "od=x"},
	} {
		o := &overrideScan{}
		var err error
		for i, p := range parts {
			n, werr := o.Write([]byte(p))
			if werr != nil {
				err = werr
				if i != len(parts)-1 || n != 0 {
					t.Errorf("%q: refused at write %d of %d having taken %d bytes", parts, i+1, len(parts), n)
				}
				break
			}
		}
		if err != errOverrideInContent {
			t.Errorf("%q: %v, want it refused", parts, err)
		}
	}
	o := &overrideScan{}
	for _, p := range []string{"a=1&method=GET&b=_metho", "x&c=%5fmeth", "_od"} {
		if n, err := o.Write([]byte(p)); err != nil || n != len(p) {
			t.Errorf("%q: %d, %v, want it passed whole", p, n, err)
		}
	}
}
