package sandbox

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestRelayServesEveryFetch: the jail's PID 1 hands out the payload's
// pipes for as many fetches as a long session makes (two per cell), not
// only until its garbage collector first runs.
func TestRelayServesEveryFetch(t *testing.T) {
	m := needJail(t)
	const fetches = 30000
	res, err := m.Run(context.Background(), Spec{
		Argv: []string{python, "-c", `import os, socket
path = os.environ["PYEXEC_RELAY"]
for i in range(` + strconv.Itoa(fetches) + `):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    tags, fds, _, _ = socket.recv_fds(s, 8, 2)
    s.close()
    for fd in fds:
        os.close(fd)
    if tags != b"cr" or len(fds) != 2:
        print("fetch", i, "got", tags, len(fds))
        break
else:
    print("all served")
print(len(os.listdir("/proc/self/fd")))`},
		Env: testEnv,
		// Natively about a second; under emulation (make test-vm) tens of
		// seconds, past the default 30 s wall time.
		Limits:        Limits{WallTime: 10 * time.Minute, CPUTime: 10 * time.Minute},
		ResultChannel: true,
		Requests:      true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Stdio, the request pipe (fd 4) and the listing's own: nothing
	// fetched stayed open.
	if res.Status != StatusOK || string(res.Stdout) != "all served\n5\n" {
		t.Fatalf("status %s stdout %q stderr %s", res.Status, res.Stdout, res.Stderr)
	}
}
