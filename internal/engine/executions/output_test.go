package executions

import (
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pyexec/pyexec/internal/sandbox"
)

type published struct {
	mu     sync.Mutex
	events []Event
}

func (p *published) add(evs []Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, evs...)
}

func TestOutputEventsCoalesceAndKeepOrder(t *testing.T) {
	tests := []struct {
		name      string
		writes    []chunk
		maxEvents int
		want      []Event
	}{
		{
			name:      "a flood of tiny writes",
			writes:    repeat(chunk{sandbox.Stdout, []byte("x")}, 10000),
			maxEvents: 5,
			want:      []Event{{Type: EventStdout, Data: strings.Repeat("x", 10000)}},
		},
		{
			name: "streams stay in order",
			writes: []chunk{
				{sandbox.Stdout, []byte("out1 ")}, {sandbox.Stdout, []byte("out2 ")},
				{sandbox.Stderr, []byte("err ")}, {sandbox.Stdout, []byte("out3")},
			},
			maxEvents: 3,
			want: []Event{
				{Type: EventStdout, Data: "out1 out2 "}, {Type: EventStderr, Data: "err "}, {Type: EventStdout, Data: "out3"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p published
			o := newOutputEvents(time.Hour, 1<<20, p.add)
			for _, w := range tt.writes {
				o.write(w.stream, w.data)
			}
			o.close()
			if len(p.events) > tt.maxEvents {
				t.Errorf("%d events, want at most %d", len(p.events), tt.maxEvents)
			}
			if got, want := joinByType(p.events), joinByType(tt.want); got != want {
				t.Errorf("events = %q, want %q", got, want)
			}
		})
	}
}

func TestOutputEventsHoldSplitCharacters(t *testing.T) {
	var p published
	o := newOutputEvents(time.Hour, 1, p.add) // flush on every write
	euro := []byte("€")                       // three bytes
	o.write(sandbox.Stdout, append([]byte("a"), euro[:1]...))
	time.Sleep(50 * time.Millisecond)
	o.write(sandbox.Stdout, euro[1:])
	o.close()
	var all strings.Builder
	for _, ev := range p.events {
		if !utf8.ValidString(ev.Data) {
			t.Errorf("event %q is not valid UTF-8", ev.Data)
		}
		all.WriteString(ev.Data)
	}
	if all.String() != "a€" {
		t.Errorf("output = %q, want a€", all.String())
	}
}

func repeat(c chunk, n int) []chunk {
	out := make([]chunk, n)
	for i := range out {
		out[i] = c
	}
	return out
}

// joinByType merges consecutive events of one type, so that results do
// not depend on where flushes fell.
func joinByType(evs []Event) string {
	var b strings.Builder
	var last EventType
	for _, ev := range evs {
		if ev.Type != last {
			b.WriteString("|" + string(ev.Type) + ":")
			last = ev.Type
		}
		b.WriteString(ev.Data)
	}
	return b.String()
}

// TestOutputEventsAreBounded holds up the first publish while the payload
// keeps writing: the writes must not wait, and what piled up must go out
// as events of at most maxBytes, each valid UTF-8, together exactly what
// was written.
func TestOutputEventsAreBounded(t *testing.T) {
	const maxBytes = 1000
	var p published
	release := make(chan struct{})
	var once sync.Once
	o := newOutputEvents(time.Hour, maxBytes, func(evs []Event) {
		once.Do(func() { <-release })
		p.add(evs)
	})
	var want strings.Builder
	for i := range 5000 {
		line := strings.Repeat("é", i%7) + "€ line\n"
		want.WriteString(line)
		o.write(sandbox.Stdout, []byte(line))
	}
	close(release)
	o.close()
	var got strings.Builder
	for _, ev := range p.events {
		if len(ev.Data) > maxBytes || !utf8.ValidString(ev.Data) {
			t.Fatalf("event of %d bytes (valid UTF-8: %v), want at most %d", len(ev.Data), utf8.ValidString(ev.Data), maxBytes)
		}
		got.WriteString(ev.Data)
	}
	if got.String() != want.String() {
		t.Errorf("events carry %d bytes, want the %d written", got.Len(), want.Len())
	}
	if min := want.Len() / maxBytes; len(p.events) < min {
		t.Errorf("%d events, want at least %d", len(p.events), min)
	}
}
