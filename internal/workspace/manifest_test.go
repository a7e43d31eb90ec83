package workspace

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
)

// bigManifest is n files in 100 folders.
func bigManifest(n int) manifest {
	m := manifest{}
	for d := range 100 {
		p := fmt.Sprintf("src/pkg%02d", d)
		m[p] = entry{Path: p, Kind: kindDir, Mode: 0o755}
	}
	m["src"] = entry{Path: "src", Kind: kindDir, Mode: 0o755}
	for i := range n {
		p := fmt.Sprintf("src/pkg%02d/file%05d.py", i%100, i)
		m[p] = entry{Path: p, Kind: kindFile, Hash: hashBytes([]byte(p)), Size: int64(100 + i), Mode: 0o644, MTime: int64(i) * 1e9}
	}
	return m
}

func decodeEncoded(t *testing.T, enc encoded) manifest {
	t.Helper()
	doc, err := decodeRoot(enc.root)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeManifest(doc, enc.pages)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestManifestRoundTrip(t *testing.T) {
	m := bigManifest(10_000)
	m["link"] = entry{Path: "link", Kind: kindLink, Target: "src/pkg00"}
	enc, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	got := decodeEncoded(t, enc)
	if !maps.Equal(got, m) {
		t.Fatal("decoded manifest differs from the encoded one")
	}
	if enc2, _ := got.encode(); enc2.rootHash != enc.rootHash {
		t.Fatal("encoding is not deterministic")
	}
}

// A one-file change of a 10,000-file manifest stores one new page and a
// new root, not the whole manifest again.
func TestManifestOneFileChangeStoresOnePage(t *testing.T) {
	m := bigManifest(10_000)
	before, _ := m.encode()
	total := len(before.root)
	for _, b := range before.pages {
		total += len(b)
	}
	changed := maps.Clone(m)
	p := "src/pkg42/file04242.py"
	e := changed[p]
	e.Hash, e.Size = hashBytes([]byte("new")), 3
	changed[p] = e
	added := maps.Clone(changed)
	added["src/pkg07/new.py"] = entry{Path: "src/pkg07/new.py", Kind: kindFile, Hash: hashBytes(nil), Mode: 0o644}
	for name, next := range map[string]manifest{"change": changed, "insert": added} {
		after, _ := next.encode()
		var fresh, freshBytes int
		for h, b := range after.pages {
			if _, ok := before.pages[h]; !ok {
				fresh++
				freshBytes += len(b)
			}
		}
		if fresh != 1 && !(name == "insert" && fresh == 2) {
			t.Errorf("%s: %d new pages of %d, want 1 (or 2 for two changed paths)", name, fresh, len(after.pages))
		}
		t.Logf("%s: manifest %d bytes in %d pages; the change stores %d bytes of pages + %d bytes of root",
			name, total, len(before.pages), freshBytes, len(after.root))
		if freshBytes+len(after.root) > total/10 {
			t.Errorf("%s stores %d bytes of a %d-byte manifest", name, freshBytes+len(after.root), total)
		}
	}
}

func TestDecodeManifestRefusesWhatCouldEscape(t *testing.T) {
	h := hashBytes(nil)
	for name, m := range map[string]manifest{
		"dotdot":          {"../x": {Path: "../x", Kind: kindFile, Hash: h}},
		"absolute":        {"/x": {Path: "/x", Kind: kindFile, Hash: h}},
		"link out":        {"l": {Path: "l", Kind: kindLink, Target: "../../etc"}},
		"absolute link":   {"l": {Path: "l", Kind: kindLink, Target: "/etc"}},
		"file under link": {"l": {Path: "l", Kind: kindLink, Target: "d"}, "d": {Path: "d", Kind: kindDir}, "l/x": {Path: "l/x", Kind: kindFile, Hash: h}},
		"no parent":       {"d/x": {Path: "d/x", Kind: kindFile, Hash: h}},
		"bad hash":        {"x": {Path: "x", Kind: kindFile, Hash: "../../etc/passwd"}},
		"setuid":          {"x": {Path: "x", Kind: kindFile, Hash: h, Mode: 0o4755}},
		"unknown kind":    {"x": {Path: "x", Kind: "c"}},
	} {
		enc, err := m.encode()
		if err != nil {
			t.Fatal(err)
		}
		doc, err := decodeRoot(enc.root)
		if err == nil {
			_, err = decodeManifest(doc, enc.pages)
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decoded (%v), want ErrCorrupt", name, err)
		}
	}
	// A root whose counts disagree with its pages.
	enc, _ := bigManifest(10).encode()
	doc, _ := decodeRoot(enc.root)
	doc.Bytes++
	if _, err := decodeManifest(doc, enc.pages); err == nil || !strings.Contains(err.Error(), "root says") {
		t.Errorf("counts off by one: %v", err)
	}
}
