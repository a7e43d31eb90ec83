package runner

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kernel is a session's kernel run on the host, wired as the jail wires it:
// the channel on fd 3, cells on fd 4, its own process group.
type kernel struct {
	t    *testing.T
	cmd  *exec.Cmd
	reqW *os.File
	next int
	scan *SessionScanner

	mu     sync.Mutex
	cells  map[int]*cellOut
	cur    *cellOut
	wg     sync.WaitGroup
	cellCh chan *cellOut
}

// cellOut is one cell as the parent splits it.
type cellOut struct {
	n              int
	stdout, stderr bytes.Buffer
	outputs        []Output
	report         *Report
	ends           int  // markers seen on stdout and stderr
	delivered      bool // handed to run, once
}

func startKernel(t *testing.T, python string) *kernel {
	t.Helper()
	return startKernelIn(t, python, t.TempDir())
}

// startKernelIn starts a kernel whose working directory is dir.
func startKernelIn(t *testing.T, python, dir string) *kernel {
	t.Helper()
	chR, chW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	k := &kernel{t: t, reqW: reqW, cells: map[int]*cellOut{}, cellCh: make(chan *cellOut, 1)}
	cmd := exec.Command(python, SessionArgv(python, SessionOptions{})[1:]...)
	cmd.Dir, cmd.Env = dir, testEnv()
	cmd.ExtraFiles = []*os.File{chW, reqR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	chW.Close()
	reqR.Close()
	k.cmd = cmd
	k.scan = NewSessionScanner(func(o Output) {
		k.mu.Lock()
		k.cur.outputs = append(k.cur.outputs, o)
		k.mu.Unlock()
	}, func(n int, r Report) {
		k.mu.Lock()
		k.cells[n].report = &r
		k.mu.Unlock()
		k.check(n)
	})
	pump := func(r interface{ Read([]byte) (int, error) }, w func([]byte)) {
		defer k.wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			w(buf[:n])
			if err != nil {
				return
			}
		}
	}
	split := func(pick func(*cellOut) *bytes.Buffer) func([]byte) {
		return NewCellSplitter(func(b []byte) {
			k.mu.Lock()
			pick(k.cur).Write(b)
			k.mu.Unlock()
		}, func(n int) {
			k.mu.Lock()
			k.cells[n].ends++
			k.mu.Unlock()
			k.check(n)
		}).Write
	}
	k.wg.Add(3)
	go pump(chR, k.scan.Write)
	go pump(stdout, split(func(c *cellOut) *bytes.Buffer { return &c.stdout }))
	go pump(stderr, split(func(c *cellOut) *bytes.Buffer { return &c.stderr }))
	t.Cleanup(func() {
		reqW.Close()
		k.wg.Wait()
		chR.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("kernel exited with %v", err)
		}
	})
	return k
}

func (k *kernel) check(n int) {
	k.mu.Lock()
	c := k.cells[n]
	// The report and the two end markers arrive on three goroutines: the
	// last two to arrive may both find the cell complete.
	done := c.report != nil && c.ends == 2 && !c.delivered
	c.delivered = c.delivered || done
	k.mu.Unlock()
	if done {
		k.cellCh <- c
	}
}

// run sends a cell and waits for it; interrupt, when positive, sends
// SIGINT that long after the cell started.
func (k *kernel) run(code string, eval bool, interrupt time.Duration) *cellOut {
	k.t.Helper()
	c := k.send(func(n int) []byte { return Cell{Number: n, Code: code, EvalLastExpr: eval}.Frame() })
	if interrupt > 0 {
		time.Sleep(interrupt)
		if err := syscall.Kill(-k.cmd.Process.Pid, syscall.SIGINT); err != nil {
			k.t.Fatal(err)
		}
	}
	return k.wait(c)
}

// send writes the frame of the next cell, made by frame from its number.
func (k *kernel) send(frame func(n int) []byte) *cellOut {
	k.t.Helper()
	k.next++
	c := &cellOut{n: k.next}
	k.mu.Lock()
	k.cells[c.n], k.cur = c, c
	k.mu.Unlock()
	if _, err := k.reqW.Write(frame(c.n)); err != nil {
		k.t.Fatal(err)
	}
	return c
}

// wait returns c once it has ended.
func (k *kernel) wait(c *cellOut) *cellOut {
	k.t.Helper()
	select {
	case got := <-k.cellCh:
		return got
	case <-time.After(60 * time.Second):
		k.t.Fatalf("cell %d did not end", c.n)
	}
	return nil
}

func TestSessionKernel(t *testing.T) {
	forEachPython(t, func(t *testing.T, python string) {
		k := startKernel(t, python)
		type want struct {
			stdout, stderrHas, result, errName string
			errLine, outputs                   int
			results                            string
		}
		cells := []struct {
			name      string
			code      string
			eval      bool
			interrupt time.Duration
			want      want
		}{
			{name: "define", code: "x = 1\nprint('set')", want: want{stdout: "set\n"}},
			{name: "update", code: "x += 1\nx", eval: true, want: want{result: "2", outputs: 1}},
			{name: "state persists", code: "print(x * 10)\nx", eval: true, want: want{stdout: "20\n", result: "2", outputs: 1}},
			{name: "error at the cell's line", code: "a = 1\n\nundefined_name\n", want: want{errName: "NameError", errLine: 3,
				stderrHas: "File \"<cell-4>\", line 3"}},
			{name: "interrupt", code: "print('loop', flush=True)\nwhile True: pass\n", interrupt: 300 * time.Millisecond,
				want: want{stdout: "loop\n", errName: "KeyboardInterrupt", errLine: 2, stderrHas: "KeyboardInterrupt"}},
			{name: "survives the interrupt", code: "x", eval: true, want: want{result: "2", outputs: 1}},
			{name: "syntax error", code: "def f(:\n  pass\n", want: want{errName: "SyntaxError", errLine: 1}},
			{name: "display in order", code: "display(1)\ndisplay('a')\n", want: want{outputs: 2}},
			{name: "results when named", code: "results = {'n': x}\n", want: want{results: `{"n":2}`}},
			{name: "results not repeated", code: "y = 3\n", want: want{}},
			{name: "exit keeps the kernel", code: "import sys\nsys.exit(3)\n", want: want{}},
			{name: "after exit", code: "x + y", eval: true, want: want{result: "5", outputs: 1}},
		}
		for _, tc := range cells {
			got := k.run(tc.code, tc.eval, tc.interrupt)
			r := got.report
			var result, errName string
			var errLine int
			if r.Result != nil {
				result = *r.Result
			}
			if r.Error != nil {
				errName, errLine = r.Error.Name, r.Error.Line
			}
			if got.stdout.String() != tc.want.stdout || result != tc.want.result || errName != tc.want.errName ||
				errLine != tc.want.errLine || len(got.outputs) != tc.want.outputs || string(r.Results) != tc.want.results ||
				!strings.Contains(got.stderr.String(), tc.want.stderrHas) {
				t.Errorf("%s: stdout=%q stderr=%q result=%q error=%s@%d outputs=%d results=%s", tc.name, got.stdout.String(),
					got.stderr.String(), result, errName, errLine, len(got.outputs), r.Results)
			}
		}
	})
}

func TestCellSplitter(t *testing.T) {
	stream := "a\x00b" + string(CellEnd(1)) + "cc" + string(CellEnd(12)) + "\x00pyexec-cell-end:x\x00d"
	for _, size := range []int{1, 2, 3, 7, len(stream)} {
		t.Run(fmt.Sprintf("chunks of %d", size), func(t *testing.T) {
			var got strings.Builder
			s := NewCellSplitter(func(b []byte) { got.Write(b) }, func(n int) { fmt.Fprintf(&got, "|%d|", n) })
			for i := 0; i < len(stream); i += size {
				s.Write([]byte(stream[i:min(i+size, len(stream))]))
			}
			if want := "a\x00b|1|cc|12|\x00pyexec-cell-end:x\x00d"; got.String() != want {
				t.Errorf("got %q, want %q", got.String(), want)
			}
		})
	}
}
