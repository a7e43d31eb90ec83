package sandbox

import (
	"bytes"
	"math/rand/v2"
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
