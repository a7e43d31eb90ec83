package workspace

import (
	"errors"
	"maps"
	"slices"
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

// Links each inside on their own text can climb out chained; the tree is
// judged as a whole, following links, and only those that escape go.
func TestChainedLinksJudgedThroughTheTree(t *testing.T) {
	dir := func(p string) entry { return entry{Path: p, Kind: kindDir, Mode: 0o755} }
	link := func(p, target string) entry { return entry{Path: p, Kind: kindLink, Target: target} }
	man := manifest{}
	for _, e := range []entry{dir("a"), dir("a/b"), dir("a/b/c"),
		link("a/b/c/up", "../../.."),                   // the top: inside
		link("x", "a/b/c/up/../../../etc"),             // through up, three above the top
		link("y", "a/b/c/up/.."),                       // through up, one above
		link("z", "a/b/c/up/a/b"),                      // through up, back down: inside
		link("loop1", "loop2"), link("loop2", "loop1"), // never resolves
		link("via", "a/b/c/up/x"), // through x: out
		link("plain", "a/b"),
	} {
		if !linkInside(e.Path, e.Target) && e.Kind == kindLink {
			t.Fatalf("%s -> %s is not inside on its text: the case tests nothing", e.Path, e.Target)
		}
		man[e.Path] = e
	}
	want := map[string]bool{"a/b/c/up": false, "x": true, "y": true, "z": false, "loop1": true, "loop2": true, "via": true, "plain": false}
	for p, escapes := range want {
		if got := man.linkEscapes(p); got != escapes {
			t.Errorf("linkEscapes(%s -> %s) = %v, want %v", p, man[p].Target, got, escapes)
		}
	}
	head := manifest{"y": {Path: "y", Kind: kindFile, Hash: hashBytes(nil), Mode: 0o644}}
	mg := merged{man: maps.Clone(man)}
	refused, err := escapingLinks(head, &mg, true)
	if err != nil {
		t.Fatal(err)
	}
	var gone []string
	for _, r := range refused {
		gone = append(gone, r.Path)
	}
	slices.Sort(gone)
	if !slices.Equal(gone, []string{"loop1", "loop2", "via", "x", "y"}) {
		t.Errorf("refused %v", gone)
	}
	if mg.man["y"].Kind != kindFile || mg.man["a/b/c/up"].Kind != kindLink || mg.man["z"].Kind != kindLink {
		t.Errorf("kept %v", mg.man)
	}
	if _, err := escapingLinks(head, &merged{man: maps.Clone(man)}, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("a whole commit with escaping links: %v", err)
	}
}
