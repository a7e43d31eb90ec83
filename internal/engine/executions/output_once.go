package executions

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/store"
)

// Output is stored once. While a run goes, its stdout and stderr are
// published as events (output.go), which followers replay. When the run
// ends, the record keeps the output only if those events do not already
// hold exactly the same bytes; otherwise it says so with an outputRef and
// Get rebuilds stdout and stderr from the events. Any doubt (a publish
// that failed, a jail that captured other bytes than it streamed) keeps
// the output in the record, as before.

// outputRef says that the output of a record is in its events.
type outputRef struct {
	// Stdout and Stderr are the lengths kept, to tell a complete rebuild
	// from events that expired or were removed before the record.
	Stdout int `json:"stdout_bytes"`
	Stderr int `json:"stderr_bytes"`
}

// outputBytes is the length of the stdout and stderr r kept, wherever
// they are.
func (r *Record) outputBytes() int64 {
	if r.Output != nil {
		return int64(r.Output.Stdout + r.Output.Stderr)
	}
	return int64(len(r.Stdout) + len(r.Stderr))
}

// errOutputGone: the events holding a record's output are gone.
var errOutputGone = errors.New("the output of this execution expired")

// publishedOutput follows the stdout and stderr events of one run as they
// are stored.
type publishedOutput struct {
	mu     sync.Mutex
	sums   [2]hash.Hash
	n      [2]int
	failed bool
}

func newPublishedOutput() *publishedOutput {
	return &publishedOutput{sums: [2]hash.Hash{sha256.New(), sha256.New()}}
}

// publish stores a batch of events like publishEvents and remembers the
// output events that were stored.
func (p *publishedOutput) publish(ctx context.Context, e *Service, id string, evs []Event) {
	err := e.publishEvents(ctx, id, evs)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range evs {
		i := outputStream(ev.Type)
		if i < 0 {
			continue
		}
		// Events are JSON text: bytes that are not UTF-8 would not come
		// back as they were written.
		if err != nil || !utf8.ValidString(ev.Data) {
			p.failed = true
			return
		}
		p.sums[i].Write([]byte(ev.Data))
		p.n[i] += len(ev.Data)
	}
}

// settle records where the output of r is kept: a reference to the
// events when they hold exactly stdout and stderr, the output itself
// otherwise. It works on the bytes the jail captured, so that the common
// case copies nothing: a multi-megabyte output is not turned into a
// string only to be left out of the stored record.
func (p *publishedOutput) settle(r *Record, stdout, stderr []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.Output = nil
	if !p.failed && (len(stdout) > 0 || len(stderr) > 0) && p.holds(0, stdout) && p.holds(1, stderr) {
		r.Output = &outputRef{Stdout: len(stdout), Stderr: len(stderr)}
		return
	}
	r.Stdout, r.Stderr = string(stdout), string(stderr)
}

// holds reports whether the events of stream i are exactly b.
func (p *publishedOutput) holds(i int, b []byte) bool {
	sum := sha256.Sum256(b)
	return p.n[i] == len(b) && bytes.Equal(p.sums[i].Sum(nil), sum[:])
}

// fill puts the output that settle left out of r back in, from the bytes
// it was settled with, when r still refers to them (a kill that won the
// race to write keeps the run's output too, see merge).
func fill(r *Record, stdout, stderr []byte) bool {
	if r.Output == nil || r.Stdout != "" || r.Stderr != "" ||
		r.Output.Stdout != len(stdout) || r.Output.Stderr != len(stderr) {
		return false
	}
	r.Stdout, r.Stderr = string(stdout), string(stderr)
	return true
}

func outputStream(t EventType) int {
	switch t {
	case EventStdout:
		return 0
	case EventStderr:
		return 1
	}
	return -1
}

// WithOutput fills in the stdout and stderr of a record that keeps them in
// its events; errOutputGone (wrapping ErrNotFound) when they are no longer
// all there.
func (e *Service) WithOutput(ctx context.Context, r *Record) error {
	if r.Output == nil || r.Stdout != "" || r.Stderr != "" {
		return nil
	}
	var out [2]strings.Builder
	out[0].Grow(r.Output.Stdout)
	out[1].Grow(r.Output.Stderr)
	err := e.st.ReadEvents(ctx, r.ID, func(m store.EventMsg) error {
		var se storedEvent
		if err := json.Unmarshal(m.Data, &se); err != nil {
			return nil // not an output event of ours; the lengths tell
		}
		if i := outputStream(se.Type); i >= 0 {
			out[i].WriteString(se.Data)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: reading the output of %s: %w", r.ID, err)
	}
	if out[0].Len() != r.Output.Stdout || out[1].Len() != r.Output.Stderr {
		return fmt.Errorf("%w: %s: %w", run.ErrNotFound, r.ID, errOutputGone)
	}
	r.Stdout, r.Stderr = out[0].String(), out[1].String()
	return nil
}
