package egress

import (
	"bytes"
	"strings"
	"testing"
)

// TestRedactorSplits: a value is replaced by its placeholder however the
// stream is cut (at every position, and a byte per write), the length is
// kept, and what cannot begin a value is not held back.
func TestRedactorSplits(t *testing.T) {
	b := Bound{Secret: Secret{Name: "T", Value: NewValue("s3cr3t-value")}, Placeholder: "pppppppppppp"}
	in := "head s3cr3t-value mid s3cr3t-s3cr3t-value tail s3cr3t-valu"
	want := "head pppppppppppp mid s3cr3t-pppppppppppp tail s3cr3t-valu"
	for cut := 0; cut <= len(in); cut++ {
		var out bytes.Buffer
		r := newRedactor(&out, []Bound{b})
		r.Write([]byte(in[:cut]))
		r.Write([]byte(in[cut:]))
		r.Flush()
		if out.String() != want {
			t.Fatalf("cut at %d: %q", cut, out.String())
		}
	}
	var out bytes.Buffer
	r := newRedactor(&out, []Bound{b})
	for i := range len(in) {
		r.Write([]byte{in[i]})
	}
	r.Flush()
	if out.String() != want {
		t.Errorf("a byte per write: %q", out.String())
	}
	out.Reset()
	r = newRedactor(&out, []Bound{b})
	r.Write([]byte("data: event\n\n"))
	if out.String() != "data: event\n\n" {
		t.Errorf("a pause held back %q", strings.TrimPrefix("data: event\n\n", out.String()))
	}
}

// TestPlaceholderScan: a placeholder is found in any ASCII case, split
// anywhere; another execution's is not taken for this one's.
func TestPlaceholderScan(t *testing.T) {
	mine := Bound{Secret: Secret{Name: "MINE"}, Placeholder: "abc123def456"}
	other := "zzz999yyy888"
	stream := "token=ABC123def456&x=" + other
	for cut := 0; cut <= len(stream); cut++ {
		s := newPlaceholderScan([]Bound{mine})
		s.Write([]byte(stream[:cut]))
		s.Write([]byte(stream[cut:]))
		if f := s.Found(); len(f) != 1 || f[0].Name != "MINE" {
			t.Fatalf("cut at %d: found %v", cut, f)
		}
	}
	if f := placeholdersIn([]byte("x="+other), []Bound{mine}); len(f) != 0 {
		t.Errorf("another placeholder found as %v", f)
	}
}
