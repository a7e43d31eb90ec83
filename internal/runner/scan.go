package runner

import "bytes"

// OutputScanner turns the channel's bytes, as they arrive in chunks, into
// rich outputs: each is handed to its callback as soon as its line is
// complete, so that a caller can publish it live. Lines that are not
// outputs (the final report, bytes the user wrote) are skipped.
type OutputScanner struct {
	fn      func(Output)
	partial []byte
}

// NewOutputScanner returns a scanner that calls fn for every output.
func NewOutputScanner(fn func(Output)) *OutputScanner {
	return &OutputScanner{fn: fn}
}

// Write consumes the next chunk of the channel. It holds at most one
// incomplete line, which the jail's channel cap bounds.
func (s *OutputScanner) Write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.partial = append(s.partial, p...)
			return
		}
		line := p[:i]
		if len(s.partial) > 0 {
			line = append(s.partial, line...)
		}
		if o, err := ParseOutput(line); err == nil {
			s.fn(o)
		}
		s.partial = s.partial[:0]
		p = p[i+1:]
	}
}
