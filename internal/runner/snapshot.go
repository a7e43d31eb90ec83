package runner

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// A session's state travels between its kernel and the server as the
// bytes snapshot.py writes and reads, which the server never interprets
// beyond their first line:
//
//	server → fd 4:  SaveRequest(n)
//	kernel → fd 3:  {"snapshot": {"bytes": N, "saved": [...], "skipped": [...]}}\n
//	                then N bytes of state: "PYEXSTATE1 TAG N0 N1 ...\n" + parts
//	                then the cell report {"cell": n, ...}
//
//	server → fd 4:  LoadRequest(n, N) then the N bytes of state
//	kernel → fd 3:  {"snapshot_loaded": {"names": [...], "skipped": [...]}}\n
//	                then the cell report {"cell": n, ...}
//
// Both are cells flagged x: the kernel runs snapshot.py in a namespace of
// its own, with the cell's end markers and report as for any cell. The
// state comes from the user's own process: it is untrusted input that the
// server only stores, protects and hands back to a kernel of the same
// owner (internal/snapshot).

//go:embed snapshot.py
var snapshotSource string

// SaveRequest is the frame that makes a session's kernel save its state,
// as cell number n: the state goes on the channel (ExpectState).
func SaveRequest(n int) []byte { return ownFrame(n, snapshotSource+"\n_save()\n") }

// LoadRequest is the frame that makes a fresh session's kernel load a state
// of size bytes, which the caller writes on the request pipe right after
// the frame (the kernel reads them all, even when it cannot use them).
func LoadRequest(n int, size int64) []byte {
	return ownFrame(n, snapshotSource+"\n_load("+strconv.FormatInt(size, 10)+")\n")
}

func ownFrame(n int, code string) []byte {
	return append(fmt.Appendf(nil, "%d %d x\n", len(code), n), code...)
}

// StateMeta is what a kernel says of the state it is about to write.
type StateMeta struct {
	// Bytes is the size of the state that follows the line.
	Bytes int64 `json:"bytes"`
	// Saved are the variables saved; Skipped those left out, each with
	// the reason (a thread, a socket, what pickle refused).
	Saved   []string  `json:"saved"`
	Skipped []Skipped `json:"skipped"`
}

// Skipped is a variable a snapshot left out, or a restore could not load.
type Skipped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Loaded is what a kernel says once it loaded a state: the variables it
// restored, and those it could not (say, a module the environment lacks).
type Loaded struct {
	Names   []string  `json:"names"`
	Skipped []Skipped `json:"skipped"`
}

// StateSink receives the state a kernel writes after SaveRequest. End is
// called once, after the last announced byte: nil when the state is well
// formed and every Write succeeded, else why it is not usable. A Write
// error drops the rest of the state (the scanner still reads past it).
type StateSink interface {
	io.Writer
	End(err error)
}

// StatePuller is a StateSink that can take the rest of a state, once its
// index line is checked, straight from where the channel's bytes come
// from (sandbox.Process.SpliceChannel, from within the channel's
// OutputFunc): a fork's state then goes from one kernel into the other
// without passing through the server's memory. Pull returns the bytes it
// took, of the n asked; fewer with the error that stopped it.
type StatePuller interface {
	StateSink
	Pull(n int64) (int64, error)
}

// ErrBadState: what a kernel wrote as its state does not describe itself
// (its first line is not an index of its size).
var ErrBadState = errors.New("malformed session state")

// stateMagic starts the index line of every state (snapshot.py's _MAGIC).
const stateMagic = "PYEXSTATE1"

// maxIndex bounds the index line of a state.
const maxIndex = 4096

// CheckStateIndex reports whether line (without its newline) is the index
// of a state of total bytes, the line and its newline included.
func CheckStateIndex(line []byte, total int64) error {
	f := bytes.Fields(line)
	if len(f) < 3 || string(f[0]) != stateMagic {
		return fmt.Errorf("%w: no index", ErrBadState)
	}
	sum := int64(len(line)) + 1
	for _, v := range f[2:] {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 0 || n > total {
			return fmt.Errorf("%w: part size %q", ErrBadState, v)
		}
		sum += n
	}
	if sum != total {
		return fmt.Errorf("%w: its parts add up to %d bytes, not %d", ErrBadState, sum, total)
	}
	return nil
}

// stateStream passes one announced state through to its sink, checking its
// index line on the way.
type stateStream struct {
	sink  StateSink
	total int64
	left  int64
	index []byte // the index line while it is incomplete
	err   error
}

// write takes the state's bytes from p and returns the rest of p.
func (st *stateStream) write(p []byte) []byte {
	n := min(int64(len(p)), st.left)
	chunk, rest := p[:n], p[n:]
	st.left -= n
	if st.index != nil && st.err == nil {
		chunk = st.checkIndex(chunk)
	}
	if len(chunk) > 0 && st.err == nil {
		if _, err := st.sink.Write(chunk); err != nil {
			st.err = err
		}
	}
	if pl, ok := st.sink.(StatePuller); ok && st.left > 0 && st.err == nil && st.index == nil {
		m, err := pl.Pull(st.left)
		st.left -= m
		st.err = err
	}
	if st.left == 0 {
		if st.err == nil && st.index != nil {
			st.err = fmt.Errorf("%w: no index line", ErrBadState)
		}
		st.sink.End(st.err)
	}
	return rest
}

// checkIndex holds back the bytes of the index line until it is whole and
// checked; it returns what may go to the sink.
func (st *stateStream) checkIndex(chunk []byte) []byte {
	i := bytes.IndexByte(chunk, '\n')
	if i < 0 {
		st.index = append(st.index, chunk...)
		if len(st.index) > maxIndex {
			st.err = fmt.Errorf("%w: no index line", ErrBadState)
		}
		return nil
	}
	line := append(st.index, chunk[:i]...)
	st.index = nil
	if st.err = CheckStateIndex(line, st.total); st.err != nil {
		return nil
	}
	return append(append(line, '\n'), chunk[i+1:]...)
}

// parseStateLine decodes a {"snapshot": ...} line.
func parseStateLine(line []byte) (StateMeta, bool) {
	var wire struct {
		Snapshot *StateMeta `json:"snapshot"`
	}
	if !bytes.HasPrefix(line, []byte(`{"snapshot":`)) || json.Unmarshal(line, &wire) != nil || wire.Snapshot == nil {
		return StateMeta{}, false
	}
	return *wire.Snapshot, wire.Snapshot.Bytes > 0
}

// parseLoadedLine decodes a {"snapshot_loaded": ...} line.
func parseLoadedLine(line []byte) (Loaded, bool) {
	var wire struct {
		Loaded *Loaded `json:"snapshot_loaded"`
	}
	if !bytes.HasPrefix(line, []byte(`{"snapshot_loaded":`)) || json.Unmarshal(line, &wire) != nil || wire.Loaded == nil {
		return Loaded{}, false
	}
	return *wire.Loaded, true
}

// stateChunk is the size of the pieces SendState writes.
const stateChunk = 1 << 20

// SendState sends a kernel LoadRequest(n, size) and then size bytes of
// state read from state, through send (the kernel's request pipe), in
// pieces: the state is never whole in memory. A state shorter than size is
// an error; the kernel then waits for the rest until the caller ends it.
func SendState(send func([]byte) error, n int, size int64, state io.Reader) error {
	if err := send(LoadRequest(n, size)); err != nil {
		return err
	}
	buf := make([]byte, stateChunk)
	for left := size; left > 0; {
		m, err := io.ReadFull(state, buf[:min(left, stateChunk)])
		if m > 0 {
			if err := send(buf[:m]); err != nil {
				return err
			}
			left -= int64(m)
		}
		if err != nil && left > 0 {
			return fmt.Errorf("sending the state: %w", err)
		}
	}
	return nil
}
