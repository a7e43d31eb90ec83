package egress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/egress/http1"
)

// copyThrough runs copyContent on a response the destination writes with
// send (given a channel on which the test says it may go on), and returns
// the payload's side of the connection, the channel, copyContent's error
// once it is done, and the connection it wrote to.
func copyThrough(t *testing.T, secrets []Bound, send func(w io.Writer, goOn <-chan struct{})) (*bufio.Reader, chan<- struct{}, <-chan error, *counted) {
	t.Helper()
	dest, upConn := net.Pipe()
	payload, pipe := net.Pipe()
	downConn := &counted{Conn: pipe}
	t.Cleanup(func() { dest.Close(); upConn.Close(); payload.Close(); downConn.Close() })
	_ = payload.SetDeadline(time.Now().Add(10 * time.Second))
	goOn := make(chan struct{})
	go send(dest, goOn)
	done := make(chan error, 1)
	go func() {
		upR := bufio.NewReaderSize(upConn, relayBuffer)
		raw, resp, err := http1.ReadResponse(upR, "GET")
		if err != nil {
			done <- err
			return
		}
		out := bufio.NewWriterSize(downConn, relayBuffer)
		out.Write(raw)
		done <- copyContent(out, upR, resp, secrets)
	}()
	return bufio.NewReader(payload), goOn, done, downConn
}

// TestContentStreamsRedacted: content reaches the payload as it comes (a
// part the destination sent is read before it sends the rest), with a
// value split over the destination's chunks replaced all the same.
func TestContentStreamsRedacted(t *testing.T) {
	b := Bound{Secret: Secret{Name: "T", Value: NewValue("s3cr3t-value")}, Placeholder: "pppppppppppp"}
	for _, chunked := range []bool{true, false} {
		first, rest := "data: one\n\n", "data: s3cr3t-value\n\n"
		payload, goOn, done, _ := copyThrough(t, []Bound{b}, func(w io.Writer, goOn <-chan struct{}) {
			if chunked {
				io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n"+first+"\r\n")
				<-goOn
				io.WriteString(w, "b\r\ndata: s3cr3\r\n9\r\nt-value\n\n\r\n0\r\n\r\n")
				return
			}
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 31\r\n\r\n"+first)
			<-goOn
			io.WriteString(w, "data: s3cr3")
			io.WriteString(w, "t-value\n\n")
		})
		resp, err := http.ReadResponse(payload, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(first))
		if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != first {
			t.Fatalf("chunked %v: the first part read %q, %v", chunked, got, err)
		}
		close(goOn)
		all, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("chunked %v: %v", chunked, err)
		}
		if want := strings.ReplaceAll(rest, "s3cr3t-value", "pppppppppppp"); string(all) != want {
			t.Errorf("chunked %v: the payload read %q, want %q", chunked, all, want)
		}
		if err := <-done; err != nil {
			t.Errorf("chunked %v: copyContent: %v", chunked, err)
		}
	}
}

// TestContentBatched: content that came while the payload was still
// reading goes to it in few writes, not one per read, whole, redacted,
// and in the destination's chunks.
func TestContentBatched(t *testing.T) {
	b := Bound{Secret: Secret{Name: "T", Value: NewValue("s3cr3t-value")}, Placeholder: "pppppppppppp"}
	const size, sent = 4 << 20, 4 << 10
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	copy(data[size/2-5:], "s3cr3t-value")
	payload, goOn, done, down := copyThrough(t, []Bound{b}, func(w io.Writer, _ <-chan struct{}) {
		io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		for p := data; len(p) > 0; p = p[sent:] {
			fmt.Fprintf(w, "%x\r\n%s\r\n", sent, p[:sent])
		}
		io.WriteString(w, "0\r\n\r\n")
	})
	close(goOn)
	if _, _, err := http1.ReadResponse(payload, "GET"); err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	for {
		time.Sleep(200 * time.Microsecond) // a payload slower than its destination
		line, err := payload.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
		if err != nil || n != sent && n != 0 {
			t.Fatalf("chunk size %q, the destination's was %x", line, sent)
		}
		if _, err := io.CopyN(&all, payload, n+2); err != nil {
			t.Fatal(err)
		}
		all.Truncate(all.Len() - 2)
		if n == 0 {
			break
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := bytes.Replace(data, []byte("s3cr3t-value"), []byte("pppppppppppp"), 1)
	if !bytes.Equal(all.Bytes(), want) {
		t.Fatalf("the payload read %d bytes, not the content redacted", all.Len())
	}
	if down.writes > size/sent/2 {
		t.Errorf("%d writes to the payload for the destination's %d chunks", down.writes, size/sent)
	}
}
