package workspace

import (
	"errors"
	"strings"
	"testing"
)

func TestCleanPathHoldsTheUploadRules(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"a.txt", "a.txt"},
		{"./a//b/./c", "a/b/c"},
		{"dir/", "dir"},
		{"../etc/passwd", ""},
		{"a/../../b", ""},
		{"/etc/passwd", ""},
		{"", ""},
		{".", ""},
		{"a\x00b", ""},
		{"bad\xffname", ""},
		{strings.Repeat("a/", 65) + "f", ""},
		{strings.Repeat("n", 256), ""},
	} {
		got, err := cleanPath(tc.in)
		if tc.want == "" {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("cleanPath(%q) = %q, %v; want ErrInvalid", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("cleanPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"repo": true, "my-data_2": true, "A": true,
		"": false, "-x": false, "a.b": false, "a/b": false, "..": false, "é": false,
		strings.Repeat("x", MaxNameBytes): true, strings.Repeat("x", MaxNameBytes+1): false,
	} {
		if err := checkName(name); (err == nil) != ok {
			t.Errorf("checkName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestLinkInside(t *testing.T) {
	for _, tc := range []struct {
		at, target string
		inside     bool
	}{
		{"a", "b", true},
		{"d/a", "../b", true},
		{"d/e/a", "../../b/c", true},
		{"a", "../b", false},
		{"d/a", "../../etc/passwd", false},
		{"a", "/etc/passwd", false},
		{"a", "", false},
		{"d/a", "x/../../..", false},
	} {
		if got := linkInside(tc.at, tc.target); got != tc.inside {
			t.Errorf("linkInside(%q, %q) = %v, want %v", tc.at, tc.target, got, tc.inside)
		}
	}
}

func TestCallerResolve(t *testing.T) {
	a, admin := Caller{Name: "a"}, Caller{Name: "ops", Admin: true}
	if o, err := a.resolve(Ref{Name: "w"}); err != nil || o != "a" {
		t.Errorf("own workspace: %q, %v", o, err)
	}
	if _, err := a.resolve(Ref{Owner: "b", Name: "w"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("another key's workspace: %v, want ErrNotFound", err)
	}
	if o, err := admin.resolve(Ref{Owner: "b", Name: "w"}); err != nil || o != "b" {
		t.Errorf("admin on b's workspace: %q, %v", o, err)
	}
	if _, err := (Caller{}).resolve(Ref{Name: "w"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("caller without a name: %v, want ErrNotFound", err)
	}
}
