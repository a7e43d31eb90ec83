package egress

import (
	"bytes"
	"io"
	"slices"
)

// redactor writes to w what is written to it with every secret value,
// and every encoded form of it (encodings.go), replaced: the value by its
// placeholder, a form by as many characters of the placeholder repeated.
// Either keeps the content's length (and a Content-Length stays true).
// The stream may come in pieces cut anywhere: a value split between two
// writes is replaced all the same, since the end of each write that could
// begin a value or a form is held back until the next write (or Flush)
// tells. Nothing else is held: a stream that pauses (server-sent events)
// reaches w whole unless its last bytes begin a value.
type redactor struct {
	w       io.Writer
	secrets []Bound
	carry   []byte
	buf     []byte // reused for each write: the carry, then what came
}

func newRedactor(w io.Writer, secrets []Bound) *redactor {
	return &redactor{w: w, secrets: secrets}
}

func (r *redactor) Write(p []byte) (int, error) {
	if len(r.secrets) == 0 {
		return r.w.Write(p)
	}
	r.buf = append(append(r.buf[:0], r.carry...), p...)
	buf := r.buf
	redactAll(buf, r.secrets)
	hold := 0
	for i := range r.secrets {
		for _, f := range r.secrets[i].patterns() {
			hold = max(hold, prefixAtEnd(buf, f))
		}
	}
	out := buf[:len(buf)-hold]
	r.carry = append(r.carry[:0], buf[len(buf)-hold:]...)
	if len(out) > 0 {
		if _, err := r.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what was held back: the stream ended.
func (r *redactor) Flush() error {
	if len(r.carry) == 0 {
		return nil
	}
	_, err := r.w.Write(r.carry)
	r.carry = nil
	return err
}

// redactAll replaces, in place, every value of secrets and every encoded
// form of one in b. The matches are all found in b as it came, then
// replaced longest first, each only where no longer one did: a value
// that holds (or overlaps) another's is replaced whole, and so is the
// other.
func redactAll(b []byte, secrets []Bound) {
	type match struct {
		at, n int
		fill  string
	}
	var ms []match
	for i := range secrets {
		s := &secrets[i]
		for _, f := range s.patterns() {
			for at := 0; ; {
				j := bytes.Index(b[at:], []byte(f))
				if j < 0 {
					break
				}
				ms = append(ms, match{at: at + j, n: len(f), fill: s.Placeholder})
				at += j + 1
			}
		}
	}
	if len(ms) == 0 {
		return
	}
	slices.SortStableFunc(ms, func(x, y match) int { return y.n - x.n })
	done := make([]bool, len(b))
	for _, m := range ms {
		for k := range m.n {
			if !done[m.at+k] {
				b[m.at+k] = m.fill[k%len(m.fill)]
				done[m.at+k] = true
			}
		}
	}
}

// prefixAtEnd is the length of the longest end of b that is a proper
// prefix of v: where v could still begin.
func prefixAtEnd(b []byte, v string) int {
	for k := min(len(v)-1, len(b)); k > 0; k-- {
		if string(b[len(b)-k:]) == v[:k] {
			return k
		}
	}
	return 0
}

// placeholderScan looks for an execution's placeholders, in any ASCII
// case, in a stream written to it in pieces cut anywhere, and remembers
// those it found. It changes nothing: a placeholder is only ever replaced
// in the one place its secret's template puts it (intercept_linux.go).
type placeholderScan struct {
	secrets []Bound
	carry   []byte
	found   []bool
	maxLen  int
}

func newPlaceholderScan(secrets []Bound) *placeholderScan {
	s := &placeholderScan{secrets: secrets, found: make([]bool, len(secrets))}
	for _, b := range secrets {
		s.maxLen = max(s.maxLen, len(b.Placeholder))
	}
	return s
}

func (s *placeholderScan) Write(p []byte) (int, error) {
	if len(s.secrets) == 0 || len(p) == 0 {
		return len(p), nil
	}
	buf := append(s.carry, p...)
	lower := bytes.ToLower(buf)
	for i, b := range s.secrets {
		if !s.found[i] && bytes.Contains(lower, []byte(b.Placeholder)) {
			s.found[i] = true
		}
	}
	keep := min(len(buf), s.maxLen-1)
	s.carry = append(s.carry[:0:0], buf[len(buf)-keep:]...)
	return len(p), nil
}

// Found returns the secrets whose placeholder was seen.
func (s *placeholderScan) Found() []*Bound {
	var out []*Bound
	for i := range s.secrets {
		if s.found[i] {
			out = append(out, &s.secrets[i])
		}
	}
	return out
}

// placeholdersIn returns the secrets whose placeholder b holds, in any
// ASCII case.
func placeholdersIn(b []byte, secrets []Bound) []*Bound {
	s := newPlaceholderScan(secrets)
	_, _ = s.Write(b)
	return s.Found()
}
