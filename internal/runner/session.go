package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// A session's kernel is the driver started with --session: it reads cells
// from its request descriptor and runs each in one persistent __main__.
//
//	parent → fd 4:     "LENGTH NUMBER FLAGS\n" + LENGTH bytes of source
//	kernel → fds 1, 2: the cell's output, then CellEnd(NUMBER)
//	kernel → fd 3:     the cell's outputs, then its report {"cell": NUMBER, ...}
//
// In a jail the kernel closes fds 3 and 4 at once and fetches both pipes
// from the jail's relay for each cell and each write (sandbox.Spec), so a
// cell runs with fds 0-2 only.
// A cell has ended when its report arrived and its end marker was seen on
// both stdout and stderr: the three pipes are drained independently, so
// the report alone does not say that the cell's last output was read.

// SessionOptions configure a session's kernel.
type SessionOptions struct {
	// FigureFormat and MaxRows are as in Options.
	FigureFormat string
	MaxRows      int
	// ReportFD and RequestFD are the channel and the cell descriptor; zero
	// means ChannelFD and RequestFD.
	ReportFD, RequestFD int
}

// SessionArgv is the command line of a session's kernel under the
// interpreter at python (an absolute path inside the jail).
func SessionArgv(python string, opts SessionOptions) []string {
	req, rep := opts.RequestFD, opts.ReportFD
	if req == 0 {
		req = RequestFD
	}
	if rep == 0 {
		rep = ChannelFD
	}
	argv := []string{python, "-B", "-c", driverSource, "--session", strconv.Itoa(req), "--report-fd", strconv.Itoa(rep)}
	if opts.FigureFormat != "" {
		argv = append(argv, "--figure-format", opts.FigureFormat)
	}
	if opts.MaxRows > 0 {
		argv = append(argv, "--max-rows", strconv.Itoa(opts.MaxRows))
	}
	return argv
}

// Cell is one piece of code sent to a session's kernel.
type Cell struct {
	Number       int // the execution count; the report and end marker carry it
	Code         string
	EvalLastExpr bool
}

// Frame is the cell as the kernel reads it on its request descriptor.
func (c Cell) Frame() []byte {
	flags := "-"
	if c.EvalLastExpr {
		flags = "e"
	}
	head := fmt.Sprintf("%d %d %s\n", len(c.Code), c.Number, flags)
	return append([]byte(head), c.Code...)
}

// CellEnd is the marker the kernel writes on stdout and stderr after cell
// n, once the cell's own output is flushed.
func CellEnd(n int) []byte { return fmt.Appendf(nil, "\x00pyexec-cell-end:%d\x00", n) }

var cellEndPrefix = []byte("\x00pyexec-cell-end:")

// CellSplitter cuts a kernel's stdout or stderr at its cell end markers:
// bytes go to data, each marker to end with its cell number. Markers split
// across chunks are reassembled; bytes that only might start one are held
// back until the next chunk decides.
type CellSplitter struct {
	data    func([]byte)
	end     func(int)
	pending []byte
}

// NewCellSplitter returns a splitter that calls data for output bytes and
// end for every marker, in stream order.
func NewCellSplitter(data func([]byte), end func(int)) *CellSplitter {
	return &CellSplitter{data: data, end: end}
}

// maxMarker bounds a marker's length (prefix, up to 19 digits, NUL).
var maxMarker = len(cellEndPrefix) + 20

// Write consumes the next chunk of the stream.
func (s *CellSplitter) Write(p []byte) {
	buf := append(s.pending, p...)
	s.pending = nil
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, 0)
		if i < 0 {
			s.data(buf)
			return
		}
		if i > 0 {
			s.data(buf[:i])
			buf = buf[i:]
		}
		n, size, state := parseMarker(buf)
		switch state {
		case markerPartial:
			s.pending = append([]byte(nil), buf...)
			return
		case markerNone:
			s.data(buf[:1])
			buf = buf[1:]
		default:
			s.end(n)
			buf = buf[size:]
		}
	}
}

type markerState int

const (
	markerNone markerState = iota
	markerPartial
	markerFound
)

// parseMarker looks at b, which starts with a NUL byte.
func parseMarker(b []byte) (n, size int, state markerState) {
	if len(b) < len(cellEndPrefix) {
		if bytes.HasPrefix(cellEndPrefix, b) {
			return 0, 0, markerPartial
		}
		return 0, 0, markerNone
	}
	if !bytes.HasPrefix(b, cellEndPrefix) {
		return 0, 0, markerNone
	}
	rest := b[len(cellEndPrefix):]
	for i, c := range rest {
		switch {
		case c == 0 && i > 0:
			v, err := strconv.Atoi(string(rest[:i]))
			if err != nil {
				return 0, 0, markerNone
			}
			return v, len(cellEndPrefix) + i + 1, markerFound
		case c < '0' || c > '9' || len(cellEndPrefix)+i+1 >= maxMarker:
			return 0, 0, markerNone
		}
	}
	return 0, 0, markerPartial
}

// SessionScanner reads a kernel's channel as it arrives: rich outputs go
// to output, cell reports to report. Lines that are neither (bytes the
// user's code wrote to the channel) are skipped. Once armed (ExpectState)
// it also takes a saved state, and with OnLoaded the outcome of a load.
type SessionScanner struct {
	output   func(Output)
	report   func(cell int, r Report)
	partial  []byte
	overlong bool         // the line being read is over maxLine: dropped
	state    *stateStream // the state being passed through, nil between

	mu     sync.Mutex
	expect func(StateMeta) StateSink
	loaded func(Loaded)
}

// maxLine bounds a channel line the scanner holds: the driver's longest
// (an output, a report) stays under its 4 MiB output budget plus the
// result's and the traceback's caps.
const maxLine = 16 << 20

// NewSessionScanner returns a scanner with the given callbacks.
func NewSessionScanner(output func(Output), report func(cell int, r Report)) *SessionScanner {
	return &SessionScanner{output: output, report: report}
}

// ExpectState arms the scanner for the state a SaveRequest makes the kernel
// write: the next {"snapshot": ...} line goes to begin, and the bytes it
// announces to the sink begin returns, never parsed as lines. Such a line
// that comes unasked (the user's code can write on the channel) is skipped
// like any other stray line.
func (s *SessionScanner) ExpectState(begin func(StateMeta) StateSink) {
	s.mu.Lock()
	s.expect = begin
	s.mu.Unlock()
}

// OnLoaded sets what receives the outcome of a LoadRequest.
func (s *SessionScanner) OnLoaded(fn func(Loaded)) {
	s.mu.Lock()
	s.loaded = fn
	s.mu.Unlock()
}

// Write consumes the next chunk of the channel.
func (s *SessionScanner) Write(p []byte) {
	for len(p) > 0 {
		if s.state != nil {
			p = s.state.write(p)
			if s.state.left == 0 {
				s.state = nil
			}
			continue
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.partial = append(s.partial, p...)
			if len(s.partial) > maxLine {
				// No line of the driver's is this long: bytes the user's
				// code writes without end, which must not grow here.
				s.partial, s.overlong = s.partial[:0], true
			}
			return
		}
		line := p[:i]
		if len(s.partial) > 0 {
			line = append(s.partial, line...)
		}
		if !s.overlong {
			s.line(line)
		}
		s.partial, s.overlong = s.partial[:0], false
		p = p[i+1:]
	}
}

func (s *SessionScanner) line(line []byte) {
	if o, err := ParseOutput(line); err == nil {
		s.output(o)
	} else if n, r, err := ParseCellReport(line); err == nil {
		s.report(n, r)
	} else if meta, ok := parseStateLine(line); ok {
		s.mu.Lock()
		begin := s.expect
		s.expect = nil
		s.mu.Unlock()
		if begin != nil {
			s.state = &stateStream{sink: begin(meta), total: meta.Bytes, left: meta.Bytes, index: []byte{}}
		}
	} else if l, ok := parseLoadedLine(line); ok {
		s.mu.Lock()
		fn := s.loaded
		s.mu.Unlock()
		if fn != nil {
			fn(l)
		}
	}
}

// ParseCellReport decodes one cell report line of a session's kernel.
func ParseCellReport(line []byte) (int, Report, error) {
	var tag struct {
		Cell *int `json:"cell"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(line), &tag); err != nil || tag.Cell == nil || *tag.Cell < 0 {
		return 0, Report{}, fmt.Errorf("%w: not a cell report", ErrMalformedReport)
	}
	r, err := ParseReport(line)
	if err != nil {
		return 0, Report{}, err
	}
	return *tag.Cell, r, nil
}

// ForkedSession splits a session kernel's command line (SessionArgv) and
// environment env into what a kernel forked from a fork server whose
// environment is base needs: the driver's arguments and env's additions to
// base. ok is false for another command line, for additions an already
// running interpreter cannot honour (PYTHON* variables act at its start)
// and for an env that drops a variable of base.
func ForkedSession(argv, env, base []string) (args, extra []string, ok bool) {
	if len(argv) < 6 || argv[1] != "-B" || argv[2] != "-c" || argv[3] != driverSource || argv[4] != "--session" {
		return nil, nil, false
	}
	for _, kv := range env {
		if slices.Contains(base, kv) {
			continue
		}
		if strings.HasPrefix(kv, "PYTHON") {
			return nil, nil, false
		}
		extra = append(extra, kv)
	}
	for _, kv := range base {
		key, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, key+"=") }) {
			return nil, nil, false
		}
	}
	return slices.Clone(argv[4:]), extra, true
}

// WaitSessionArgs are the driver's arguments for a kernel forked ahead of
// its session: it waits on RequestFD for its SessionRequest, then serves
// cells on the same descriptor.
func WaitSessionArgs() []string { return []string{"--wait-session", strconv.Itoa(RequestFD)} }

// SessionRequest is what a kernel started with WaitSessionArgs reads: args
// as ForkedSession returns them ("--session N" and the kernel's options)
// and env additions. ok is false for fields it cannot carry.
func SessionRequest(args, env []string) (b []byte, ok bool) {
	if len(args) < 2 || args[0] != "--session" {
		return nil, false
	}
	var body bytes.Buffer
	for _, f := range append(append([]string{strconv.Itoa(len(args) - 2)}, args[2:]...), env...) {
		if strings.IndexByte(f, 0) >= 0 {
			return nil, false
		}
		body.WriteString(f)
		body.WriteByte(0)
	}
	return append(strconv.AppendInt(nil, int64(body.Len()), 10), append([]byte{'\n'}, body.Bytes()...)...), true
}
