package snapshot

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/runner"
)

// A snapshot file is a magic string, then records, each a kind byte, a
// big-endian uint32 length and that many bytes:
//
//	"PYXSNAP1"
//	'H' header JSON                  once, first
//	'S' state bytes                  any number, in order (runner's state)
//	'F' workspace tar bytes          any number, after the state
//	'M' HMAC-SHA256, 32 bytes        once, last: nothing follows
//
// The MAC covers every byte before the 'M' record, under a key derived
// from the server's key and the owner (ownerKey): the same bytes verified
// for another owner, or under another server's key, do not match.

const magic = "PYXSNAP1"

// Record kinds.
const (
	kindHeader = 'H'
	kindState  = 'S'
	kindFiles  = 'F'
	kindMAC    = 'M'
)

const (
	recordHead = 5 // kind + length
	macSize    = sha256.Size
	trailer    = recordHead + macSize
	// maxRecord bounds one record's payload: writes are cut to it.
	maxRecord = 1 << 20
	// maxHeader bounds the header record.
	maxHeader = 1 << 20
)

// Caps on what a header may list: the saved and skipped names come from
// the user's interpreter.
const (
	maxNames  = 10000
	maxReason = 1000
)

// Sentinel errors; callers map them with errors.Is.
var (
	// ErrTooLarge: the snapshot is over the size cap (a 413).
	ErrTooLarge = errors.New("snapshot over the size cap")
	// ErrIntegrity: the bytes are not a snapshot this server made for
	// this owner, unchanged: tampered, forged, truncated, another owner's
	// or another key's. Deliberately one error for all of them.
	ErrIntegrity = errors.New("snapshot refused: not made by this server for this owner, or changed since")
	// ErrInvalidHeader: the header the caller gave NewWriter cannot be
	// written.
	ErrInvalidHeader = errors.New("invalid snapshot header")
)

// Header says what a snapshot holds. The server writes it; the state's
// kernel only contributes the names (Saved, Skipped).
type Header struct {
	ID      string    `json:"id"`
	Owner   string    `json:"owner"` // the API key's name that owns it
	Created time.Time `json:"created"`
	// Kind says who made it and why (KindUser...); SessionID names the
	// session it was made of.
	Kind      string  `json:"kind,omitempty"`
	SessionID string  `json:"session_id,omitempty"`
	Session   Session `json:"session"`
	// ExecutionCount is the session's count of cells when it was saved.
	ExecutionCount int `json:"execution_count"`
	// Saved and Skipped are the variables saved and those left out, with
	// the reason (runner.StateMeta).
	Saved   []string         `json:"saved"`
	Skipped []runner.Skipped `json:"skipped"`
	// StateBytes is the size of the state; the writer holds it to that.
	StateBytes int64 `json:"state_bytes"`
}

// Session is the configuration a restore recreates the session with.
type Session struct {
	PythonVersion string        `json:"python_version"`
	Requirements  string        `json:"requirements,omitempty"`
	Env           []string      `json:"env,omitempty"`
	MemoryBytes   int64         `json:"memory_bytes,omitempty"`
	DiskBytes     int64         `json:"disk_bytes,omitempty"`
	CPUShares     int           `json:"cpu_shares,omitempty"`
	IdleTimeout   time.Duration `json:"idle_timeout,omitempty"`
	MaxLifetime   time.Duration `json:"max_lifetime,omitempty"`
	FigureFormat  string        `json:"figure_format,omitempty"`
	MaxRows       int           `json:"max_rows,omitempty"`
	// Network, NetworkAllow and Secrets (names, never values or
	// placeholders) are what the session asked of the network. Only the
	// session's own hibernation gives them back (a parked session adopted
	// at the next start); a restore (from_snapshot) takes the network of
	// its create request.
	Network      bool     `json:"network,omitempty"`
	NetworkAllow []string `json:"network_allow,omitempty"`
	Secrets      []string `json:"secrets,omitempty"`
	// NetworkUsed is what the session's network spent of its quotas so
	// far, for its own hibernation to carry (nil: nothing).
	NetworkUsed *NetworkUsed `json:"network_used,omitempty"`
}

// NetworkUsed is a session's network use over its life: the bytes its
// egresses carried, the limit that cut its network ("" if none), and the
// events not yet handed to a cell's result (oldest first), which its next
// cell's result carries. A header written before Events was added has
// none.
type NetworkUsed struct {
	BytesOut int64          `json:"bytes_out,omitempty"`
	BytesIn  int64          `json:"bytes_in,omitempty"`
	Limit    string         `json:"limit,omitempty"`
	Events   []egress.Event `json:"events,omitempty"`
}

// MaxNetworkEvents bounds the events a session keeps for its next cell's
// result, and so those a header carries.
const MaxNetworkEvents = 1000

// Kinds of snapshots.
const (
	// KindUser: the owner asked for it; it is listed and kept until the
	// owner deletes it.
	KindUser = "user"
	// KindHibernation: the server saved an idle session (or a live one
	// as it shut down) to end its kernel; the session resumes from it.
	KindHibernation = "hibernation"
	// KindCheckpoint: the server saved a session after a cell, so that it
	// can resume from it when its node is lost.
	KindCheckpoint = "checkpoint"
)

// NewID returns a new snapshot id.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "snap_" + hex.EncodeToString(b[:])
}

func (h Header) check() error {
	switch {
	case h.ID == "" || h.Owner == "":
		return fmt.Errorf("%w: a snapshot needs an id and an owner", ErrInvalidHeader)
	case h.StateBytes <= 0:
		return fmt.Errorf("%w: no state", ErrInvalidHeader)
	case len(h.Saved)+len(h.Skipped) > maxNames:
		return fmt.Errorf("%w: more than %d names", ErrInvalidHeader, maxNames)
	case h.Session.NetworkUsed != nil && len(h.Session.NetworkUsed.Events) > MaxNetworkEvents:
		return fmt.Errorf("%w: more than %d network events", ErrInvalidHeader, MaxNetworkEvents)
	}
	for _, s := range h.Skipped {
		if len(s.Reason) > maxReason || len(s.Name) > maxReason {
			return fmt.Errorf("%w: a skipped name or reason over %d bytes", ErrInvalidHeader, maxReason)
		}
	}
	return nil
}

// ownerKey is the MAC key of owner's snapshots.
func ownerKey(k Key, owner string) []byte {
	m := hmac.New(sha256.New, k.b[:])
	m.Write([]byte("pyexec snapshot v1\x00"))
	m.Write([]byte(owner))
	return m.Sum(nil)
}

// Writer streams a snapshot as it is made: the header first, then the
// state (State), then the workspace (Files); Close adds the MAC. Nothing
// is buffered beyond one record's header.
type Writer struct {
	dst   io.Writer
	mac   hash.Hash
	limit int64
	size  int64
	want  int64 // state bytes announced
	state int64
	files int64
	phase byte // the kind of the last record written
	err   error
}

// marshalHeader encodes h within maxHeader. A header over it sheds the
// network events it carries, the newest first: they are the one part of
// a session it can go without (each was logged and audited when it
// happened), where a header too large would keep the session from being
// saved at all.
func marshalHeader(h Header) ([]byte, error) {
	head, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidHeader, err)
	}
	if n := h.Session.NetworkUsed; len(head) > maxHeader && n != nil && len(n.Events) > 0 {
		used := *n // the caller's stays as it was
		h.Session.NetworkUsed = &used
		for len(head) > maxHeader && len(used.Events) > 0 {
			over, drop := len(head)-maxHeader, 0
			for size := 0; size < over && drop < len(used.Events); drop++ {
				b, _ := json.Marshal(used.Events[len(used.Events)-1-drop]) // plain fields: it never fails
				size += len(b) + 1
			}
			used.Events = used.Events[:len(used.Events)-drop]
			if head, err = json.Marshal(h); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidHeader, err)
			}
		}
	}
	if len(head) > maxHeader {
		return nil, fmt.Errorf("%w: header of %d bytes", ErrInvalidHeader, len(head))
	}
	return head, nil
}

// NewWriter starts a snapshot of h on dst, at most limit bytes in all.
func NewWriter(dst io.Writer, key Key, h Header, limit int64) (*Writer, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	head, err := marshalHeader(h)
	if err != nil {
		return nil, err
	}
	w := &Writer{dst: dst, mac: hmac.New(sha256.New, ownerKey(key, h.Owner)), limit: limit, want: h.StateBytes}
	if err := w.raw([]byte(magic)); err != nil {
		return nil, err
	}
	if err := w.record(kindHeader, head); err != nil {
		return nil, err
	}
	return w, nil
}

// raw writes b to dst and the MAC, within the cap.
func (w *Writer) raw(b []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.size+int64(len(b)) > w.limit-trailer {
		w.err = fmt.Errorf("%w of %d bytes", ErrTooLarge, w.limit)
		return w.err
	}
	if _, err := w.dst.Write(b); err != nil {
		w.err = fmt.Errorf("writing the snapshot: %w", err)
		return w.err
	}
	w.mac.Write(b)
	w.size += int64(len(b))
	return nil
}

func (w *Writer) record(kind byte, p []byte) error {
	var head [recordHead]byte
	head[0] = kind
	binary.BigEndian.PutUint32(head[1:], uint32(len(p)))
	if err := w.raw(head[:]); err != nil {
		return err
	}
	if err := w.raw(p); err != nil {
		return err
	}
	w.phase = kind
	return nil
}

// records writes p as records of kind, each at most maxRecord bytes.
func (w *Writer) records(kind byte, p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxRecord)]
		if err := w.record(kind, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, w.err
}

// State is where the kernel's state goes: exactly Header.StateBytes bytes,
// before anything is written to Files.
func (w *Writer) State() io.Writer { return stateWriter{w} }

// Files is where the workspace's tar goes (Tar), after the whole state.
func (w *Writer) Files() io.Writer { return filesWriter{w} }

type stateWriter struct{ w *Writer }

func (s stateWriter) Write(p []byte) (int, error) {
	w := s.w
	switch {
	case w.err != nil:
		return 0, w.err
	case w.phase == kindFiles:
		return 0, errors.New("snapshot: state written after the files")
	case w.state+int64(len(p)) > w.want:
		w.err = fmt.Errorf("snapshot: more state than the %d bytes announced", w.want)
		return 0, w.err
	}
	n, err := w.records(kindState, p)
	w.state += int64(n)
	return n, err
}

type filesWriter struct{ w *Writer }

func (f filesWriter) Write(p []byte) (int, error) {
	w := f.w
	if w.err == nil && w.state != w.want {
		w.err = fmt.Errorf("snapshot: files written after %d of %d bytes of state", w.state, w.want)
	}
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.records(kindFiles, p)
	w.files += int64(n)
	return n, err
}

// Close checks that the whole state was written and ends the snapshot with
// its MAC; it returns the snapshot's size. It does not close dst.
func (w *Writer) Close() (int64, error) {
	if w.err == nil && w.state != w.want {
		w.err = fmt.Errorf("snapshot: %d of %d bytes of state written", w.state, w.want)
	}
	if w.err != nil {
		return 0, w.err
	}
	var head [recordHead]byte
	head[0] = kindMAC
	binary.BigEndian.PutUint32(head[1:], macSize)
	sum := w.mac.Sum(nil)
	if _, err := w.dst.Write(append(head[:], sum...)); err != nil {
		w.err = fmt.Errorf("writing the snapshot: %w", err)
		return 0, w.err
	}
	w.size += trailer
	w.err = errors.New("snapshot: already closed")
	return w.size, nil
}

// section is one record's payload in the file.
type section struct{ off, n int64 }

// Snapshot is a verified snapshot, read from r.
type Snapshot struct {
	Header Header
	// StateBytes and FilesBytes are the sizes of the state and of the
	// workspace's tar; Size that of the whole file.
	StateBytes, FilesBytes, Size int64

	r            io.ReaderAt
	state, files []section
	closer       io.Closer
	onClose      []func()
	closed       bool
}

// Open verifies the snapshot of size bytes at r for owner, under key and
// the size cap, and returns it. Every byte is read and the MAC checked
// before anything of it is returned: an error means nothing of r may be
// used. r must not change afterwards (the caller's own file).
func Open(r io.ReaderAt, size int64, key Key, owner string, limit int64) (*Snapshot, error) {
	if size > limit {
		return nil, fmt.Errorf("%w of %d bytes: it has %d", ErrTooLarge, limit, size)
	}
	if size < int64(len(magic))+recordHead+trailer {
		return nil, fmt.Errorf("%w: too short", ErrIntegrity)
	}
	mac := hmac.New(sha256.New, ownerKey(key, owner))
	body := size - trailer
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, body), 256<<10)
	s := &Snapshot{Size: size, r: r}
	var head []byte
	read := func(b []byte) error {
		if _, err := io.ReadFull(br, b); err != nil {
			return fmt.Errorf("%w: %w", ErrIntegrity, err)
		}
		mac.Write(b)
		return nil
	}
	m := make([]byte, len(magic))
	if err := read(m); err != nil {
		return nil, err
	}
	if string(m) != magic {
		return nil, fmt.Errorf("%w: not a snapshot", ErrIntegrity)
	}
	off := int64(len(magic))
	var last byte
	buf := make([]byte, 256<<10)
	for off < body {
		var rh [recordHead]byte
		if off+recordHead > body {
			return nil, fmt.Errorf("%w: truncated record", ErrIntegrity)
		}
		if err := read(rh[:]); err != nil {
			return nil, err
		}
		kind, n := rh[0], int64(binary.BigEndian.Uint32(rh[1:]))
		off += recordHead
		// The Writer never writes an empty state or files record: one
		// would only cost memory here before the MAC is checked.
		if n > body-off || !next(last, kind) || (kind == kindHeader && n > maxHeader) || (kind != kindHeader && n == 0) {
			return nil, fmt.Errorf("%w: malformed record", ErrIntegrity)
		}
		sec := section{off, n}
		switch kind {
		case kindHeader:
			head = make([]byte, n)
			if err := read(head); err != nil {
				return nil, err
			}
		case kindState, kindFiles:
			if got, err := io.CopyBuffer(mac, io.LimitReader(br, n), buf); err != nil || got != n {
				return nil, fmt.Errorf("%w: short record (%v)", ErrIntegrity, err)
			}
			if kind == kindState {
				s.state, s.StateBytes = append(s.state, sec), s.StateBytes+n
			} else {
				s.files, s.FilesBytes = append(s.files, sec), s.FilesBytes+n
			}
		}
		off += n
		last = kind
	}
	if head == nil {
		return nil, fmt.Errorf("%w: no header", ErrIntegrity)
	}
	var tail [trailer]byte
	if _, err := r.ReadAt(tail[:], body); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIntegrity, err)
	}
	if tail[0] != kindMAC || binary.BigEndian.Uint32(tail[1:recordHead]) != macSize ||
		!hmac.Equal(mac.Sum(nil), tail[recordHead:]) {
		return nil, ErrIntegrity
	}
	// Authentic from here: the header is the server's own.
	if err := json.Unmarshal(head, &s.Header); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrIntegrity, err)
	}
	if s.Header.Owner != owner || s.Header.StateBytes != s.StateBytes {
		return nil, fmt.Errorf("%w: header does not match", ErrIntegrity)
	}
	return s, nil
}

// next reports whether a record of kind may follow one of last (0: none).
func next(last, kind byte) bool {
	switch kind {
	case kindHeader:
		return last == 0
	case kindState:
		return last == kindHeader || last == kindState
	case kindFiles:
		return last == kindState || last == kindFiles
	}
	return false
}

// State reads the kernel's state (for runner.LoadRequest).
func (s *Snapshot) State() io.Reader { return s.reader(s.state) }

// Files reads the workspace's tar (for Untar).
func (s *Snapshot) Files() io.Reader { return s.reader(s.files) }

func (s *Snapshot) reader(secs []section) io.Reader {
	rs := make([]io.Reader, len(secs))
	for i, sec := range secs {
		rs[i] = io.NewSectionReader(s.r, sec.off, sec.n)
	}
	return io.MultiReader(rs...)
}

// Close releases the file Receive spooled the snapshot into (nothing for
// one from Open), then runs what OnClose added; a second Close does
// nothing.
func (s *Snapshot) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.closer != nil {
		err = s.closer.Close()
	}
	for _, f := range s.onClose {
		f()
	}
	return err
}

// OnClose has Close run f once the snapshot's file is released.
func (s *Snapshot) OnClose(f func()) { s.onClose = append(s.onClose, f) }
