package client

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// maxSSELine bounds one line of an event stream; an output chunk of the
// server is far smaller.
const maxSSELine = 8 << 20

// sseMessage is one dispatched Server-Sent Event.
type sseMessage struct {
	id    string
	event string
	data  string
}

// sseReader parses a text/event-stream as the WHATWG HTML specification
// describes it: lines end in LF, CRLF or CR; a line starting with ":" is a
// comment (servers send them as heartbeats); "data" lines of one event are
// joined with LF; a blank line dispatches the event, and one without data
// is dropped. The "retry" field is ignored: the caller does not reconnect.
type sseReader struct {
	sc      *bufio.Scanner
	started bool // past the first line, where a byte order mark may stand
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	sc.Split(scanSSELines)
	return &sseReader{sc: sc}
}

// next returns the next event, or io.EOF when the stream ends (an event not
// followed by a blank line is incomplete and dropped, as the spec says).
func (r *sseReader) next() (sseMessage, error) {
	var (
		msg     sseMessage
		data    strings.Builder
		hasData bool
	)
	for r.sc.Scan() {
		line := r.sc.Text()
		if !r.started {
			line = strings.TrimPrefix(line, "\uFEFF")
			r.started = true
		}
		if line == "" {
			if !hasData {
				msg = sseMessage{}
				continue
			}
			msg.data = data.String()
			return msg, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "event":
			msg.event = value
		case "id":
			if !strings.ContainsRune(value, 0) {
				msg.id = value
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		return sseMessage{}, err
	}
	return sseMessage{}, io.EOF
}

// scanSSELines is a bufio.SplitFunc for lines ending in LF, CRLF or CR.
func scanSSELines(data []byte, atEOF bool) (int, []byte, error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		switch {
		case i+1 < len(data) && data[i+1] == '\n':
			return i + 2, data[:i], nil
		case i+1 < len(data) || atEOF:
			return i + 1, data[:i], nil
		}
		return 0, nil, nil // a CR at the end of the buffer: is an LF next?
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}
