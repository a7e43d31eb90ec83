package sandbox

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waiter is silentWaiter announcing that it is up.
const waiter = "print('ready', flush=True)\n" + silentWaiter

// TestHandOffTightensLimitsOfAWarmPayload: a payload started ahead of time
// with generous ceilings gets the request's tighter limits, its files and
// a fresh clock at hand-off.
func TestHandOffTightensLimitsOfAWarmPayload(t *testing.T) {
	m := needJail(t)
	ceilings := Limits{MemoryBytes: 512 << 20, WorkspaceBytes: 64 << 20, WallTime: 3 * time.Second, FileSizeBytes: 1 << 20}
	start := func(t *testing.T) *Process {
		t.Helper()
		j, err := m.Prepare(context.Background(), Base{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		ready := make(chan struct{})
		var once sync.Once
		p, err := j.Start(context.Background(), Spec{Argv: []string{python, "-c", waiter}, Requests: true, Limits: ceilings},
			func(s Stream, b []byte) {
				if s == Stdout && strings.Contains(string(b), "ready") {
					once.Do(func() { close(ready) })
				}
			})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-ready:
		case <-time.After(10 * time.Second):
			t.Fatalf("the warm payload never got ready: %+v", p.Wait())
		}
		return p
	}
	cases := []struct {
		name   string
		limits Limits
		files  []File
		code   string
		check  func(t *testing.T, r Result)
	}{
		{"files and a fresh clock", Limits{WallTime: 2 * time.Second, FileSizeBytes: 1 << 20},
			[]File{{Path: "data/in.txt", Data: []byte("handed over")}},
			"import time, os\ntime.sleep(1.5)\nprint(open('/work/data/in.txt').read(), os.stat('/work/data').st_uid)\n",
			func(t *testing.T, r Result) { printed("handed over 65534")(t, r) }},
		{"memory limit shrinks", Limits{MemoryBytes: 64 << 20, FileSizeBytes: 1 << 20}, nil,
			"x = bytearray(200 << 20)\nprint('allocated')\n",
			func(t *testing.T, r Result) { ended(StatusOOM, 10*time.Second)(t, r) }},
		{"workspace shrinks", Limits{WorkspaceBytes: 2 << 20, FileSizeBytes: 1 << 20}, nil,
			"import errno\ntry:\n    for i in range(8): open('/work/f%d' % i, 'wb').write(b'x' * (900 << 10))\n    print('WROTE')\nexcept OSError as e: print('FULL', errno.errorcode[e.errno])\n",
			func(t *testing.T, r Result) { printed("FULL ENOSPC")(t, r) }},
		{"a mount keeps its size when asked the same, another shrinks", Limits{WorkspaceBytes: 64 << 20, ShmBytes: 1 << 20, FileSizeBytes: 1 << 20}, nil,
			"import os\nfor d in ('/work', '/tmp', '/dev/shm'):\n    s = os.statvfs(d); print(d, s.f_blocks * s.f_frsize >> 20)\n",
			func(t *testing.T, r Result) { printed("/work 64\n/tmp 64\n/dev/shm 1")(t, r) }},
		{"the workspace grows", Limits{WorkspaceBytes: 96 << 20, FileSizeBytes: 1 << 20}, nil,
			"import os\ns = os.statvfs('/work'); print('/work', s.f_blocks * s.f_frsize >> 20)\n",
			func(t *testing.T, r Result) { printed("/work 96")(t, r) }},
		{"the started file size rlimit stays", Limits{FileSizeBytes: 1 << 20}, nil,
			"import errno\ntry:\n    open('/work/big', 'wb').write(b'x' * (3 << 20)); print('WROTE')\nexcept OSError as e: print('LIMIT', errno.errorcode[e.errno])\n",
			func(t *testing.T, r Result) { printed("LIMIT EFBIG")(t, r) }},
		{"wall time restarts at hand-off", Limits{WallTime: 500 * time.Millisecond, FileSizeBytes: 1 << 20}, nil,
			"import time\ntime.sleep(5)\n",
			func(t *testing.T, r Result) { ended(StatusTimeout, 2*time.Second)(t, r) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := start(t)
			time.Sleep(200 * time.Millisecond) // idle in the pool for a while
			if err := p.HandOff(c.limits, c.files, []byte(c.code)); err != nil {
				t.Fatal(err)
			}
			p.CloseStdin()
			c.check(t, p.Wait())
		})
	}
}

// TestProcessSessionLike: one payload serves several requests, survives an
// interrupt of a busy one, and reports its memory.
func TestProcessSessionLike(t *testing.T) {
	m := needJail(t)
	j, err := m.Prepare(context.Background(), Base{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	kernel := `import os, signal
buf = b""
env = {}
while True:
    chunk = os.read(4, 65536)
    if not chunk:
        break
    buf += chunk
    while b"\n\n" in buf:
        cell, buf = buf.split(b"\n\n", 1)
        try:
            exec(cell.decode(), env)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
`
	var mu sync.Mutex
	var out strings.Builder
	p, err := j.Start(context.Background(), Spec{Argv: []string{python, "-u", "-c", kernel}, Requests: true},
		func(s Stream, b []byte) {
			mu.Lock()
			out.Write(b)
			mu.Unlock()
		})
	if err != nil {
		t.Fatal(err)
	}
	seen := func(want string) bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(out.String(), want)
	}
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !seen(want) {
			if time.Now().After(deadline) {
				t.Fatalf("never saw %q; output so far %q; %+v", want, out.String(), p.res)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := p.Send([]byte("x = 41\n\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.Send([]byte("print('busy', flush=True)\nwhile True: pass\n\n")); err != nil {
		t.Fatal(err)
	}
	waitFor("busy")
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitFor("interrupted")
	if mem := p.MemoryUsage(); mem <= 0 {
		t.Errorf("memory usage %d", mem)
	}
	if err := p.Send([]byte("print('x is', x + 1)\n\n")); err != nil {
		t.Fatal(err)
	}
	waitFor("x is 42")
	p.CloseSend()
	p.CloseStdin()
	if r := p.Wait(); r.Status != StatusOK {
		t.Fatalf("status %s (%s) stderr %s", r.Status, r.Reason, r.Stderr)
	}
}

// TestHandOffFilesAreNotCollectedBack: files handed to a warm payload are
// inputs: collected back only when the run changed them.
func TestHandOffFilesAreNotCollectedBack(t *testing.T) {
	m := needJail(t)
	j, err := m.Prepare(context.Background(), Base{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	p, err := j.Start(context.Background(), Spec{Argv: []string{python, "-c", silentWaiter}, Requests: true, Collect: &Collect{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := []File{{Path: "main.py", Data: []byte("kept as is")}, {Path: "data.txt", Data: []byte("old")}}
	code := "open('/work/data.txt', 'w').write('new')\nopen('/work/out.txt', 'w').write('made')\n"
	if err := p.HandOff(Limits{}, files, []byte(code)); err != nil {
		t.Fatal(err)
	}
	p.CloseStdin()
	r := p.Wait()
	var got []string
	for _, f := range r.Files {
		got = append(got, f.Path+"="+string(f.Data))
	}
	if strings.Join(got, ",") != "data.txt=new,out.txt=made" {
		t.Fatalf("collected %v (status %s %s)", got, r.Status, r.Stderr)
	}
}
