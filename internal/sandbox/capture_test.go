package sandbox

import (
	"bytes"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCaptureKeepsLargeOutputsExactly: an output spread over many blocks,
// written in uneven pieces, comes back byte for byte up to the limit, and
// the live callback sees the same bytes.
func TestCaptureKeepsLargeOutputsExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, tt := range []struct {
		name      string
		limit     int64
		truncated bool
	}{
		{"under the limit", int64(len(data)) + 1, false},
		{"exactly the limit", int64(len(data)), false},
		{"cut inside a block", 2<<20 + 12345, true},
		{"cut at a block edge", 4<<10 + 8<<10 + 16<<10, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var live bytes.Buffer
			c := &capture{stream: Stdout, limit: tt.limit, live: func(_ Stream, p []byte) { live.Write(p) }}
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(70<<10))
				c.add(rest[:n])
				rest = rest[n:]
			}
			got, truncated := c.result()
			want := data[:min(int64(len(data)), tt.limit)]
			if !bytes.Equal(got, want) || truncated != tt.truncated {
				t.Fatalf("kept %d bytes (equal: %v), truncated %v; want %d bytes, truncated %v",
					len(got), bytes.Equal(got, want), truncated, len(want), tt.truncated)
			}
			if again, _ := c.result(); !bytes.Equal(again, want) {
				t.Error("a second result differs from the first")
			}
			if !bytes.Equal(live.Bytes(), want) {
				t.Errorf("live saw %d bytes, want the %d kept", live.Len(), len(want))
			}
		})
	}
}

// pacedReader hands out data as a pipe would: each read returns at most
// the next of its pieces' sizes (and what the buffer holds), and it notes
// the size of every buffer it is given.
type pacedReader struct {
	data   []byte
	pieces []int
	bufs   []int
}

func (r *pacedReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	r.bufs = append(r.bufs, len(p))
	n := min(len(p), len(r.data))
	if len(r.pieces) > 0 {
		n = min(n, r.pieces[0])
		r.pieces = r.pieces[1:]
	}
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// TestCaptureDrainsAStreamInBulk: an output that arrives faster than it is
// read (a session's state) is read in bulkChunk pieces, byte for byte, and
// once it slows down the capture reads into its small chunk again.
func TestCaptureDrainsAStreamInBulk(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 5<<20+100)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	// A burst of 5 MiB, then a trickle of 100 bytes in 10-byte writes.
	pieces := []int{captureChunk, bulkChunk, bulkChunk, bulkChunk, bulkChunk, bulkChunk - captureChunk}
	for range 10 {
		pieces = append(pieces, 10)
	}
	r := &pacedReader{data: data, pieces: pieces}
	var live bytes.Buffer
	c := &capture{stream: Channel, discard: true, live: func(_ Stream, p []byte) { live.Write(p) }}
	c.drain(r, make([]byte, captureChunk))
	if !bytes.Equal(live.Bytes(), data) {
		t.Fatalf("live saw %d bytes (equal: %v), want the %d written", live.Len(), bytes.Equal(live.Bytes(), data), len(data))
	}
	want := []int{captureChunk, bulkChunk, bulkChunk, bulkChunk, bulkChunk, bulkChunk, bulkChunk}
	for range 9 {
		want = append(want, captureChunk)
	}
	if !slices.Equal(r.bufs, want) {
		t.Errorf("read into buffers of %v bytes, want %v", r.bufs, want)
	}
}
