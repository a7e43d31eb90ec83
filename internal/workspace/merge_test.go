package workspace

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// tree builds a manifest from "path=content" (a file), "path/" (a
// directory) and "path->target" (a link), adding parent directories.
func tree(specs ...string) manifest {
	m := manifest{}
	for _, s := range specs {
		var e entry
		switch {
		case strings.HasSuffix(s, "/"):
			p := strings.TrimSuffix(s, "/")
			e = entry{Path: p, Kind: kindDir, Mode: 0o755}
		case strings.Contains(s, "->"):
			p, target, _ := strings.Cut(s, "->")
			e = entry{Path: p, Kind: kindLink, Target: target}
		default:
			p, content, _ := strings.Cut(s, "=")
			e = entry{Path: p, Kind: kindFile, Hash: hashBytes([]byte(content)), Size: int64(len(content)), Mode: 0o644}
		}
		m[e.Path] = e
		parentDirs(e.Path, func(d string) {
			if _, ok := m[d]; !ok {
				m[d] = entry{Path: d, Kind: kindDir, Mode: 0o755}
			}
		})
	}
	return m
}

// diff is the change set that turns base into ours.
func diff(base, ours manifest) map[string]*entry {
	out := map[string]*entry{}
	for p, e := range ours {
		if b, ok := base[p]; !ok || b != e {
			out[p] = &e
		}
	}
	for p := range base {
		if _, ok := ours[p]; !ok {
			out[p] = nil
		}
	}
	return out
}

func content(m manifest, p string) string {
	e, ok := m[p]
	switch {
	case !ok:
		return "<absent>"
	case e.Kind == kindDir:
		return "<dir>"
	case e.Kind == kindLink:
		return "->" + e.Target
	}
	return e.Hash[:8]
}

func TestMerge(t *testing.T) {
	h := func(s string) string { return hashBytes([]byte(s))[:8] }
	for _, tc := range []struct {
		name             string
		base, head, ours manifest
		want             map[string]string // path → content (h(...)), "<dir>", "<absent>"
		conflicts        []string          // "path→kept_as" or "path" (nothing kept)
	}{{
		name: "distinct files both land",
		base: tree("a=1"), head: tree("a=1", "theirs=t"), ours: tree("a=1", "ours=o"),
		want: map[string]string{"a": h("1"), "theirs": h("t"), "ours": h("o")},
	}, {
		name: "same file changed by both: theirs at the path, ours beside it",
		base: tree("a=1"), head: tree("a=theirs"), ours: tree("a=ours"),
		want:      map[string]string{"a": h("theirs"), "a.conflict-5": h("ours")},
		conflicts: []string{"a→a.conflict-5"},
	}, {
		name: "the same change twice is no conflict",
		base: tree("a=1"), head: tree("a=2"), ours: tree("a=2"),
		want: map[string]string{"a": h("2")},
	}, {
		name: "deleted here, changed there: the change stays",
		base: tree("a=1"), head: tree("a=2"), ours: tree(),
		want:      map[string]string{"a": h("2")},
		conflicts: []string{"a"},
	}, {
		name: "changed here, deleted there: ours kept beside the path",
		base: tree("a=1"), head: tree(), ours: tree("a=2"),
		want:      map[string]string{"a": "<absent>", "a.conflict-5": h("2")},
		conflicts: []string{"a→a.conflict-5"},
	}, {
		name: "a clean deletion",
		base: tree("a=1", "b=2"), head: tree("a=1", "b=2", "c=3"), ours: tree("b=2"),
		want: map[string]string{"a": "<absent>", "b": h("2"), "c": h("3")},
	}, {
		name: "a folder deleted here while another writer added to it stays, with the new file",
		base: tree("d/x=1"), head: tree("d/x=1", "d/new=n"), ours: tree(),
		want:      map[string]string{"d": "<dir>", "d/x": "<absent>", "d/new": h("n")},
		conflicts: []string{"d"},
	}, {
		name: "a file added to a folder another writer deleted brings the folder back",
		base: tree("d/x=1"), head: tree(), ours: tree("d/x=1", "d/mine=m"),
		want: map[string]string{"d": "<dir>", "d/x": "<absent>", "d/mine": h("m")},
	}, {
		name: "their file where ours is a folder: our files move under the conflict name",
		base: tree(), head: tree("p=theirs"), ours: tree("p/a=1", "p/q/b=2"),
		want:      map[string]string{"p": h("theirs"), "p.conflict-5": "<dir>", "p.conflict-5/a": h("1"), "p.conflict-5/q/b": h("2")},
		conflicts: []string{"p→p.conflict-5", "p/a→p.conflict-5/a", "p/q/b→p.conflict-5/q/b"},
	}, {
		name: "our file where theirs is a folder: ours moves, their folder stays",
		base: tree(), head: tree("p/a=theirs"), ours: tree("p=mine"),
		want:      map[string]string{"p": "<dir>", "p/a": h("theirs"), "p.conflict-5": h("mine")},
		conflicts: []string{"p→p.conflict-5"},
	}, {
		name: "a folder made by both is one folder with both files",
		base: tree(), head: tree("d/t=1"), ours: tree("d/o=2"),
		want: map[string]string{"d": "<dir>", "d/t": h("1"), "d/o": h("2")},
	}, {
		name: "a folder whose mode this writer changed, deleted by another, stays deleted",
		base: tree("d/"), head: tree(), ours: manifest{"d": {Path: "d", Kind: kindDir, Mode: 0o700}},
		want: map[string]string{"d": "<absent>", "d.conflict-5": "<absent>"},
	}, {
		name: "a conflict name already taken is numbered on",
		base: tree("a=1"), head: tree("a=2", "a.conflict-5=x"), ours: tree("a=3"),
		want:      map[string]string{"a": h("2"), "a.conflict-5": h("x"), "a.conflict-5-2": h("3")},
		conflicts: []string{"a→a.conflict-5-2"},
	}, {
		name: "links merge like files",
		base: tree("l->a"), head: tree("l->b"), ours: tree("l->c"),
		want:      map[string]string{"l": "->b", "l.conflict-5": "->c"},
		conflicts: []string{"l→l.conflict-5"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			mg := merge(tc.base, tc.head, 3, 5, diff(tc.base, tc.ours))
			for p, want := range tc.want {
				if got := content(mg.man, p); got != want {
					t.Errorf("%s: %s, want %s", p, got, want)
				}
			}
			if err := mg.man.checkTree(); err != nil {
				t.Errorf("merged tree: %v", err)
			}
			var got []string
			for _, c := range mg.conflicts {
				s := c.Path
				if c.KeptAs != "" {
					s += "→" + c.KeptAs
				}
				got = append(got, s)
				if c.Reason == "" {
					t.Errorf("conflict at %s without a reason", c.Path)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.conflicts))
			if !slices.Equal(got, want) {
				t.Errorf("conflicts %q, want %q", got, want)
			}
		})
	}
}

// Every file any writer wrote is somewhere in the result, across a range
// of random-ish overlapping edits.
func TestMergeLosesNoFile(t *testing.T) {
	base := tree("a=1", "b=1", "d/x=1", "d/y=1", "e/f/g=1")
	heads := []manifest{
		tree("a=h", "b=1", "d/x=1", "d/y=1", "e/f/g=1"),
		tree("a=1", "d/x=h", "e=h"),
		tree("b=h", "d=h", "e/f/g=1", "e/f/new=h"),
		tree(),
	}
	ours := []manifest{
		tree("a=o", "b=1", "d/x=1", "d/y=1", "e/f/g=1"),
		tree("a=1", "b=o", "d/x=o", "d/z=o", "e/f/g=o"),
		tree("a=1", "d/y=1", "d/x=1", "e/f=o"),
		tree("a/b=o"),
	}
	for hi, head := range heads {
		for oi, our := range ours {
			mg := merge(base, head, 1, 7, diff(base, our))
			if err := mg.man.checkTree(); err != nil {
				t.Fatalf("head %d ours %d: %v", hi, oi, err)
			}
			have := map[string]bool{}
			for _, e := range mg.man {
				if e.Kind == kindFile {
					have[e.Hash] = true
				}
			}
			for name, m := range map[string]manifest{"head": head, "ours": our} {
				for p, e := range m {
					if e.Kind != kindFile {
						continue
					}
					if b, ok := base[p]; ok && b == e {
						continue // unchanged from the base: another writer may delete it
					}
					if !have[e.Hash] {
						t.Errorf("head %d ours %d: %s's %s (%s) is lost", hi, oi, name, p, e.Hash[:8])
					}
				}
			}
		}
	}
}

// A conflict on a name or path at the limits is kept under a name within
// them (cut at a character's start), so the version stays mountable.
func TestConflictNamesWithinTheLimits(t *testing.T) {
	long := strings.Repeat("n", 255)
	utf := strings.Repeat("é", 127) + "x" // 255 bytes, two-byte characters
	deep := strings.Repeat("d", 200) + "/" + strings.Repeat("e", 200) + "/" + strings.Repeat("f", 200) + "/" +
		strings.Repeat("g", 200) + "/" + strings.Repeat("h", 200) + "/file.txt"
	for _, p := range []string{long, utf, deep, "short"} {
		base := tree(p + "=base")
		head := tree(p + "=theirs")
		mg := merge(base, head, 1, 3, diff(base, tree(p+"=ours")))
		if len(mg.conflicts) != 1 || mg.conflicts[0].KeptAs == "" {
			t.Fatalf("%.20s…: conflicts %+v", p, mg.conflicts)
		}
		kept := mg.conflicts[0].KeptAs
		if err := sandbox.CheckPathLimits(kept); err != nil || !utf8.ValidString(kept) || !strings.Contains(kept, ".conflict-3") {
			t.Errorf("%.20s… kept as %q (%d bytes): %v", p, kept, len(kept), err)
		}
		if mg.man[kept].Hash != hashBytes([]byte("ours")) || mg.man[p].Hash != hashBytes([]byte("theirs")) {
			t.Errorf("%.20s…: ours at %q %+v, theirs %+v", p, kept, mg.man[kept], mg.man[p])
		}
	}
	if got := conflictPath("short", ".conflict-3"); got != "short.conflict-3" {
		t.Errorf("a short name becomes %q", got)
	}
}

// A commit never stores a path beyond the limits: a run's is refused by
// name (the head's entry stays), an API change fails whole.
func TestCommitRefusesPathsBeyondTheLimits(t *testing.T) {
	tooLong := strings.Repeat("n", 256)
	head := tree(tooLong[:255] + "=kept")
	mg := merged{man: tree(tooLong+"=new", "ok=fine", tooLong[:255]+"=kept")}
	refused, err := beyondLimits(head, &mg, true)
	if err != nil || len(refused) != 1 || refused[0].Path != tooLong {
		t.Fatalf("refused %v, %v", refused, err)
	}
	if _, ok := mg.man[tooLong]; ok || mg.man["ok"].Kind != kindFile {
		t.Errorf("left %d entries", len(mg.man))
	}
	if _, err := beyondLimits(head, &merged{man: tree(tooLong + "=new")}, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("a whole commit: %v", err)
	}
}
