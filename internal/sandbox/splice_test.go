package sandbox

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// TestSplicePipesMovesExactlyN: bytes written in uneven pieces, with
// pauses, into one pipe come out of the other byte for byte, exactly the
// n asked (what follows stays in the source), whichever side waits.
func TestSplicePipesMovesExactlyN(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	const n = 3<<20 - 1000
	srcR, srcW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer srcR.Close()
	dstR, dstW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer dstR.Close()
	go func() {
		for rest := data; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(300<<10))
			srcW.Write(rest[:k])
			rest = rest[k:]
			time.Sleep(time.Millisecond)
		}
		srcW.Close()
	}()
	got := make(chan []byte)
	go func() {
		var out bytes.Buffer
		buf := make([]byte, 100<<10)
		for {
			time.Sleep(time.Millisecond) // a slow reader: the destination fills
			k, err := dstR.Read(buf)
			out.Write(buf[:k])
			if err != nil {
				got <- out.Bytes()
				return
			}
		}
	}()
	moved, err := splicePipes(srcR, dstW, n)
	dstW.Close()
	if moved != n || err != nil {
		t.Fatalf("moved %d bytes, %v; want %d", moved, err, n)
	}
	if out := <-got; !bytes.Equal(out, data[:n]) {
		t.Fatalf("the destination read %d bytes (equal: %v), want the first %d", len(out), bytes.Equal(out, data[:n]), n)
	}
	rest, _ := io.ReadAll(srcR)
	if !bytes.Equal(rest, data[n:]) {
		t.Errorf("%d bytes left in the source, want the last %d", len(rest), len(data)-n)
	}
}

// TestSplicePipesStops: a source that ends early or a destination that
// closes (a killed kernel) stop the splice with an error, never a hang.
func TestSplicePipesStops(t *testing.T) {
	srcR, srcW, _ := os.Pipe()
	dstR, dstW, _ := os.Pipe()
	defer srcR.Close()
	defer dstW.Close()
	srcW.Write([]byte("short"))
	srcW.Close()
	go io.Copy(io.Discard, dstR)
	if moved, err := splicePipes(srcR, dstW, 100); moved != 5 || err == nil {
		t.Errorf("a source ending after 5 of 100 bytes: moved %d, %v", moved, err)
	}
	dstR.Close()

	srcR2, srcW2, _ := os.Pipe()
	dstR2, dstW2, _ := os.Pipe()
	defer srcR2.Close()
	defer srcW2.Close()
	defer dstW2.Close()
	go srcW2.Write(make([]byte, 4<<20))
	go func() {
		buf := make([]byte, 1000)
		dstR2.Read(buf)
		dstR2.Close()
	}()
	if moved, err := splicePipes(srcR2, dstW2, 4<<20); moved == 4<<20 || !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("a destination closed early: moved %d, %v", moved, err)
	}
}
