package runner

import (
	"bytes"
	"sync"
)

// OutputScanner turns the channel's bytes, as they arrive in chunks, into
// rich outputs: each is handed to its callback as soon as its line is
// complete, so that a caller can publish it live. Lines that are not
// outputs (the final report, bytes the user wrote) are skipped. Once the
// run is over, Report decodes the report with the outputs already decoded
// rather than decoding them a second time.
type OutputScanner struct {
	fn func(Output)

	mu      sync.Mutex
	partial []byte
	seen    int      // bytes consumed
	outputs []Output // every output decoded, in order
	ends    []int    // per output: the offset just past its line
}

// NewOutputScanner returns a scanner that calls fn for every output.
func NewOutputScanner(fn func(Output)) *OutputScanner {
	return &OutputScanner{fn: fn}
}

// Write consumes the next chunk of the channel. It holds at most one
// incomplete line, which the jail's channel cap bounds.
func (s *OutputScanner) Write(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.partial = append(s.partial, p...)
			s.seen += len(p)
			return
		}
		line := p[:i]
		if len(s.partial) > 0 {
			line = append(s.partial, line...)
		}
		s.seen += i + 1
		if o, err := ParseOutput(line); err == nil {
			s.outputs = append(s.outputs, o)
			s.ends = append(s.ends, s.seen)
			s.fn(o)
		}
		s.partial = s.partial[:0]
		p = p[i+1:]
	}
}

// Report decodes the report of a channel whose bytes were all written to
// s, as ParseReport does: the outputs are those s decoded from the lines
// before the report's. A channel that is not what s consumed (the capture
// kept other bytes than it streamed) is decoded from scratch.
func (s *OutputScanner) Report(channel []byte) (Report, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen != len(channel) {
		return ParseReport(channel)
	}
	before, last, err := splitReport(channel)
	if err != nil {
		return Report{}, err
	}
	n := 0
	for n < len(s.ends) && s.ends[n] <= len(before) {
		n++
	}
	var outputs []Output
	if n > 0 {
		outputs = s.outputs[:n:n]
	}
	return parseLast(last, outputs)
}
