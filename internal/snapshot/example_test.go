package snapshot_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/snapshot"
)

// A snapshot is written as the kernel's state streams in, and opened only
// for the owner and under the key it was made with.
func Example() {
	key, _ := snapshot.ParseKey(strings.Repeat("0f", 32))
	state := []byte("PYEXSTATE1 cpython-311 3\nabc") // what runner.SaveRequest makes a kernel write
	var file bytes.Buffer
	w, _ := snapshot.NewWriter(&file, key, snapshot.Header{ID: snapshot.NewID(), Owner: "alice",
		StateBytes: int64(len(state))}, 1<<20)
	_, _ = w.State().Write(state)
	_, _ = w.Files().Write(nil) // the workspace's tar (snapshot.Tar)
	size, _ := w.Close()

	s, err := snapshot.Open(bytes.NewReader(file.Bytes()), size, key, "alice", 1<<20)
	fmt.Println(s.Header.Owner, s.StateBytes, err)
	_, err = snapshot.Open(bytes.NewReader(file.Bytes()), size, key, "bob", 1<<20)
	fmt.Println(err)
	// Output:
	// alice 28 <nil>
	// snapshot refused: not made by this server for this owner, or changed since
}
