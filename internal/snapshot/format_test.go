package snapshot

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/runner"
)

func testKey(t *testing.T) Key {
	t.Helper()
	var k Key
	if _, err := rand.Read(k.b[:]); err != nil {
		t.Fatal(err)
	}
	return k
}

func header(owner string, state int) Header {
	return Header{ID: NewID(), Owner: owner, Created: time.Unix(1700000000, 0).UTC(), ExecutionCount: 7,
		Session: Session{PythonVersion: "3.11", MemoryBytes: 256 << 20, Env: []string{"A=1"}},
		Saved:   []string{"df", "f"}, Skipped: []runner.Skipped{{Name: "sock", Reason: "an open socket cannot be saved"}},
		StateBytes: int64(state)}
}

// write makes a snapshot of state and files, written in chunks of chunk
// bytes as the kernel's channel delivers them.
func write(t *testing.T, key Key, h Header, state, files []byte, chunk int) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(&out, key, h, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []struct {
		dst io.Writer
		b   []byte
	}{{w.State(), state}, {w.Files(), files}} {
		for b := part.b; len(b) > 0; {
			n := min(chunk, len(b))
			if _, err := part.dst.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
	}
	size, err := w.Close()
	if err != nil || size != int64(out.Len()) {
		t.Fatalf("Close: %d, %v (wrote %d)", size, err, out.Len())
	}
	return out.Bytes()
}

func TestRoundTrip(t *testing.T) {
	key := testKey(t)
	state := bytes.Repeat([]byte("state "), 400000) // over two records
	files := []byte("a tar")
	for _, chunk := range []int{1 << 15, 3 << 20} {
		h := header("alice", len(state))
		raw := write(t, key, h, state, files, chunk)
		s, err := Open(bytes.NewReader(raw), int64(len(raw)), key, "alice", 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		gotState, _ := io.ReadAll(s.State())
		gotFiles, _ := io.ReadAll(s.Files())
		if !bytes.Equal(gotState, state) || !bytes.Equal(gotFiles, files) || s.StateBytes != int64(len(state)) ||
			s.FilesBytes != int64(len(files)) || s.Size != int64(len(raw)) {
			t.Fatalf("chunks of %d: state %d bytes, files %q, sizes %d %d %d", chunk, len(gotState), gotFiles,
				s.StateBytes, s.FilesBytes, s.Size)
		}
		if s.Header.ID != h.ID || s.Header.Owner != "alice" || !s.Header.Created.Equal(h.Created) ||
			s.Header.Session.MemoryBytes != 256<<20 || s.Header.Skipped[0].Name != "sock" || s.Header.ExecutionCount != 7 {
			t.Fatalf("header %+v", s.Header)
		}
	}
}

// TestRefused: every way a snapshot can be other than what this server
// made for this owner is one error, before anything is returned.
func TestRefused(t *testing.T) {
	key := testKey(t)
	state := []byte("PYEXSTATE1 cpython-311 4\nabcd")
	raw := write(t, key, header("alice", len(state)), state, []byte("tar"), 1<<20)
	flip := func(i int) []byte {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return b
	}
	// A forger without the key writes a well-formed file with any MAC.
	forged := write(t, testKey(t), header("alice", len(state)), state, []byte("tar"), 1<<20)
	// Records moved: the files record before the state.
	swapped := bytes.Clone(raw)
	stateAt := bytes.Index(raw, state) - recordHead
	swapped[stateAt] = kindFiles
	cases := map[string][]byte{
		"a byte of the state changed":  flip(bytes.Index(raw, []byte("abcd"))),
		"a byte of the header changed": flip(bytes.Index(raw, []byte("alice"))),
		"a byte of the files changed":  flip(bytes.Index(raw, []byte("tar"))),
		"the MAC changed":              flip(len(raw) - 1),
		"the magic changed":            flip(0),
		"truncated":                    raw[:len(raw)-1],
		"cut before the MAC":           raw[:len(raw)-trailer],
		"bytes appended":               append(bytes.Clone(raw), 0),
		"forged under another key":     forged,
		"records out of order":         swapped,
		"empty":                        nil,
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Open(bytes.NewReader(b), int64(len(b)), key, "alice", 1<<30)
			if s != nil || !errors.Is(err, ErrIntegrity) {
				t.Fatalf("Open: %v, %v; want ErrIntegrity", s, err)
			}
		})
	}
	t.Run("another owner", func(t *testing.T) {
		if _, err := Open(bytes.NewReader(raw), int64(len(raw)), key, "bob", 1<<30); !errors.Is(err, ErrIntegrity) {
			t.Fatalf("bob opened alice's snapshot: %v", err)
		}
	})
}

func TestSizeCap(t *testing.T) {
	key := testKey(t)
	state := bytes.Repeat([]byte{7}, 10000)
	w, err := NewWriter(io.Discard, key, header("alice", len(state)), 5000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.State().Write(state); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "5000 bytes") {
		t.Fatalf("writing past the cap: %v", err)
	}
	if _, err := w.Close(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Close after the cap: %v", err)
	}
	raw := write(t, key, header("alice", len(state)), state, nil, 1<<20)
	if _, err := Open(bytes.NewReader(raw), int64(len(raw)), key, "alice", int64(len(raw)-1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Open over the cap: %v", err)
	}
	if _, err := Receive(bytes.NewReader(raw), t.TempDir(), key, "alice", int64(len(raw)-1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Receive over the cap: %v", err)
	}
}

func TestWriterHoldsTheStateToItsSize(t *testing.T) {
	key := testKey(t)
	w, _ := NewWriter(io.Discard, key, header("alice", 4), 1<<20)
	if _, err := w.State().Write([]byte("abcde")); err == nil {
		t.Error("more state than announced was written")
	}
	w, _ = NewWriter(io.Discard, key, header("alice", 4), 1<<20)
	_, _ = w.State().Write([]byte("abc"))
	if _, err := w.Files().Write([]byte("x")); err == nil {
		t.Error("files written before the whole state")
	}
	if _, err := w.Close(); err == nil {
		t.Error("closed with a short state")
	}
	for name, h := range map[string]Header{"no owner": {ID: "s", StateBytes: 1}, "no id": {Owner: "a", StateBytes: 1},
		"no state": {ID: "s", Owner: "a"}} {
		if _, err := NewWriter(io.Discard, key, h, 1<<20); !errors.Is(err, ErrInvalidHeader) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestReceive(t *testing.T) {
	key := testKey(t)
	state := []byte("the state")
	raw := write(t, key, header("alice", len(state)), state, []byte("tar"), 1<<20)
	dir := t.TempDir()
	s, err := Receive(bytes.NewReader(raw), dir, key, "alice", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(s.State())
	if string(got) != "the state" {
		t.Fatalf("state %q", got)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the spool is visible in %s: %v", dir, left)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(raw)
	bad[len(bad)/2] ^= 1
	if _, err := Receive(bytes.NewReader(bad), dir, key, "alice", 1<<20); !errors.Is(err, ErrIntegrity) {
		t.Fatalf("a tampered stream: %v", err)
	}
}

func TestKeys(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", st, err)
	}
	k2, err := LoadKey(dir)
	if err != nil || k2 != k1 {
		t.Fatalf("the key changed between starts: %v", err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, KeyFile))
	if k3, err := ParseKey(string(raw)); err != nil || k3 != k1 {
		t.Fatalf("the file's text is not the setting's form: %v", err)
	}
	if strings.Contains(k1.String(), strings.TrimSpace(string(raw))[:8]) {
		t.Error("String shows the key")
	}
	if err := os.Chmod(filepath.Join(dir, KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(dir); !errors.Is(err, ErrKey) {
		t.Errorf("a key others may read: %v", err)
	}
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, KeyFile), []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(broken); !errors.Is(err, ErrKey) {
		t.Errorf("a broken key file: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(broken, KeyFile)); string(got) != "short\n" {
		t.Error("a broken key file was replaced")
	}
	for _, s := range []string{"", "abc", strings.Repeat("zz", 32), strings.Repeat("ab", 31)} {
		if _, err := ParseKey(s); !errors.Is(err, ErrKey) {
			t.Errorf("ParseKey(%q): %v", s, err)
		}
	}
}

// TestRecordHeaderIsBigEndian pins the layout the docs describe.
func TestRecordHeaderIsBigEndian(t *testing.T) {
	key := testKey(t)
	raw := write(t, key, header("alice", 3), []byte("abc"), nil, 1<<20)
	if string(raw[:8]) != magic || raw[8] != kindHeader {
		t.Fatalf("starts %q", raw[:9])
	}
	n := binary.BigEndian.Uint32(raw[9:13])
	if raw[13+n] != kindState || raw[len(raw)-trailer] != kindMAC {
		t.Fatalf("layout: %q ... %q", raw[13+n], raw[len(raw)-trailer])
	}
}

// TestNetworkEvents: a header carries a session's network events not yet
// in a cell's result, and no more than a session keeps.
func TestNetworkEvents(t *testing.T) {
	key := testKey(t)
	state := []byte("state")
	ev := egress.Event{Proto: "tcp", Host: "192.0.2.99", Port: 80, Verdict: egress.VerdictDeny, Reason: egress.ReasonNotAllowed}
	h := header("alice", len(state))
	h.Session.NetworkUsed = &NetworkUsed{BytesIn: 3, Events: []egress.Event{ev}}
	raw := write(t, key, h, state, []byte("tar"), 1<<20)
	s, err := Open(bytes.NewReader(raw), int64(len(raw)), key, "alice", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Header.Session.NetworkUsed; got == nil || len(got.Events) != 1 || got.Events[0] != ev || got.BytesIn != 3 {
		t.Errorf("network used read back: %+v, want 3 bytes in and the refusal", got)
	}
	h.Session.NetworkUsed.Events = make([]egress.Event, MaxNetworkEvents+1)
	if _, err := NewWriter(io.Discard, key, h, 1<<30); !errors.Is(err, ErrInvalidHeader) {
		t.Errorf("a header of %d events: %v, want ErrInvalidHeader", MaxNetworkEvents+1, err)
	}
}

// TestHeaderShedsEventsToFit: a session whose variables' names fill most
// of a header still hibernates; the network events it carries are what
// gives way, the newest first, and the caller's header is left as it was.
func TestHeaderShedsEventsToFit(t *testing.T) {
	key := testKey(t)
	state := []byte("state")
	h := header("alice", len(state))
	h.Saved = nil
	for i := range 9500 { // ≈ 1,000 KB of names, within maxNames
		h.Saved = append(h.Saved, fmt.Sprintf("a_long_variable_name_%080d", i))
	}
	events := make([]egress.Event, MaxNetworkEvents)
	for i := range events {
		events[i] = egress.Event{Proto: "tcp", Host: fmt.Sprintf("host-%04d.example.test", i), Port: 443,
			Verdict: egress.VerdictDeny, Reason: egress.ReasonNotAllowed}
	}
	h.Session.NetworkUsed = &NetworkUsed{BytesOut: 5, Events: events}
	raw := write(t, key, h, state, []byte("tar"), 1<<20)
	s, err := Open(bytes.NewReader(raw), int64(len(raw)), key, "alice", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Header.Session.NetworkUsed
	if got == nil || got.BytesOut != 5 || len(got.Events) == 0 || len(got.Events) >= MaxNetworkEvents {
		t.Fatalf("network used read back: %d events, want some but not all %d", len(got.Events), MaxNetworkEvents)
	}
	for i, ev := range got.Events {
		if ev != events[i] {
			t.Fatalf("event %d read back as %+v, want the earliest kept in order (%+v)", i, ev, events[i])
		}
	}
	if len(s.Header.Saved) != 9500 || len(h.Session.NetworkUsed.Events) != MaxNetworkEvents {
		t.Errorf("%d names read back, the caller's header now holds %d events; want 9500 and %d",
			len(s.Header.Saved), len(h.Session.NetworkUsed.Events), MaxNetworkEvents)
	}
}
