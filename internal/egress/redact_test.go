package egress

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
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

// reflectedValue is a value with every character a common encoder
// escapes.
const reflectedValue = `ghp_S3cr3t+V4lue/0123"456\789<&> '=abc`

// TestRedactorEncodedEchoes: a destination that reflects the value
// escaped (JSON as Go, PHP and .NET write it, percent-encoded in either
// case, HTML references, base64 of the whole field) gives back text
// that, decoded as the payload would, holds no value; the length is
// kept, and the decoded text is still well formed.
func TestRedactorEncodedEchoes(t *testing.T) {
	s, err := Secret{Name: "T", Value: NewValue(reflectedValue)}.Bind()
	if err != nil {
		t.Fatal(err)
	}
	field := "Bearer " + reflectedValue
	goJSON, _ := json.Marshal(map[string]string{"authorization": field})
	php := strings.ReplaceAll(string(goJSON), "/", `\/`)
	var dotnet strings.Builder
	for _, c := range []byte(field) {
		switch {
		case strings.IndexByte(`"+<>&'`+"`", c) >= 0:
			fmt.Fprintf(&dotnet, `\u%04X`, c)
		case c == '\\':
			dotnet.WriteString(`\\`)
		default:
			dotnet.WriteByte(c)
		}
	}
	fromJSON := func(b string) (string, error) {
		var m map[string]string
		err := json.Unmarshal([]byte(b), &m)
		return m["authorization"], err
	}
	for _, c := range []struct {
		name   string
		echo   string
		decode func(string) (string, error)
	}{
		{"go json", string(goJSON), fromJSON},
		{"php json", php, fromJSON},
		{".net json", `{"authorization":"` + dotnet.String() + `"}`, fromJSON},
		{"percent", "a=" + url.QueryEscape(field), func(b string) (string, error) { return url.QueryUnescape(b[2:]) }},
		{"percent lower", "a=" + strings.ToLower(url.PathEscape(field)), func(b string) (string, error) { return url.PathUnescape(b[2:]) }},
		{"html", "<p>" + html.EscapeString(field) + "</p>", func(b string) (string, error) { return html.UnescapeString(b), nil }},
		{"base64", base64.StdEncoding.EncodeToString([]byte(field)), func(b string) (string, error) {
			d, err := base64.StdEncoding.DecodeString(b)
			return string(d), err
		}},
	} {
		for cut := 0; cut <= len(c.echo); cut += 7 {
			var out bytes.Buffer
			r := newRedactor(&out, []Bound{s})
			r.Write([]byte(c.echo[:cut]))
			r.Write([]byte(c.echo[cut:]))
			r.Flush()
			if out.Len() != len(c.echo) {
				t.Fatalf("%s: length %d, want %d", c.name, out.Len(), len(c.echo))
			}
			got, err := c.decode(out.String())
			if err != nil {
				t.Fatalf("%s: the redacted echo no longer decodes: %v (%s)", c.name, err, out.String())
			}
			// Base64 keeps up to two bytes at each end of the value
			// (those that share a group with what surrounds it).
			if strings.Contains(got, reflectedValue[2:len(reflectedValue)-2]) {
				t.Fatalf("%s, cut at %d: the value decoded from %s", c.name, cut, out.String())
			}
		}
	}
}

// TestRedactOverlapping: when one secret's value holds another's, both
// are redacted whichever comes first in the grant.
func TestRedactOverlapping(t *testing.T) {
	inner := Bound{Secret: Secret{Name: "A", Value: NewValue("INNERsecret")}, Placeholder: "aaaaaaaaaaa"}
	outer := Bound{Secret: Secret{Name: "B", Value: NewValue("outer-INNERsecret-tail")}, Placeholder: "bbbbbbbbbbbbbbbbbbbbbb"}
	for _, grant := range [][]Bound{{inner, outer}, {outer, inner}} {
		var out bytes.Buffer
		r := newRedactor(&out, grant)
		r.Write([]byte("x outer-INNERsecret-tail y INNERsecret z"))
		r.Flush()
		if want := "x bbbbbbbbbbbbbbbbbbbbbb y aaaaaaaaaaa z"; out.String() != want {
			t.Errorf("grant %s first: %q, want %q", grant[0].Name, out.String(), want)
		}
	}
}
