package sandbox

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSpecValidate(t *testing.T) {
	ok := Spec{Argv: []string{"/usr/bin/python3", "-c", "pass"}}
	cases := []struct {
		name    string
		mutate  func(*Spec)
		wantErr string
	}{
		{"valid", func(*Spec) {}, ""},
		{"empty argv", func(s *Spec) { s.Argv = nil }, "empty argv"},
		{"relative program", func(s *Spec) { s.Argv = []string{"python3"} }, "not an absolute path"},
		{"NUL in argv", func(s *Spec) { s.Argv = append(s.Argv, "a\x00b") }, "NUL"},
		{"env without =", func(s *Spec) { s.Env = []string{"NOVALUE"} }, "KEY=value"},
		{"env with empty key", func(s *Spec) { s.Env = []string{"=x"} }, "KEY=value"},
		{"relative dir", func(s *Spec) { s.Dir = "work" }, "not absolute"},
		{"file with ..", func(s *Spec) { s.Files = []File{{Path: "../etc/passwd"}} }, `contains ".."`},
		{"absolute file", func(s *Spec) { s.Files = []File{{Path: "/etc/passwd"}} }, "absolute"},
		{"empty file name", func(s *Spec) { s.Files = []File{{Path: ""}} }, "invalid file name"},
		{"dot file name", func(s *Spec) { s.Files = []File{{Path: "./"}} }, "invalid file name"},
		{"nested file", func(s *Spec) { s.Files = []File{{Path: "pkg/mod/x.py"}} }, ""},
		{"mount over /proc", func(s *Spec) { s.Mounts = []Mount{{Source: "/opt/x", Target: "/proc/x"}} }, "reserved"},
		{"mount over /work", func(s *Spec) { s.Mounts = []Mount{{Source: "/opt/x", Target: "/work"}} }, "reserved"},
		{"mount over /", func(s *Spec) { s.Mounts = []Mount{{Source: "/opt/x", Target: "/"}} }, "below /"},
		{"relative mount", func(s *Spec) { s.Mounts = []Mount{{Source: "opt/x"}} }, "clean absolute"},
		{"unclean mount", func(s *Spec) { s.Mounts = []Mount{{Source: "/opt/../etc"}} }, "clean absolute"},
		{"tiny memory", func(s *Spec) { s.Limits.MemoryBytes = 1024 }, "memory limit"},
		{"negative wall time", func(s *Spec) { s.Limits.WallTime = -time.Second }, "wall time"},
		{"too few open files", func(s *Spec) { s.Limits.OpenFiles = 3 }, "open files"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := ok
			s.Argv = append([]string(nil), ok.Argv...)
			c.mutate(&s)
			err := s.Validate()
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want ErrInvalidSpec mentioning %q", err, c.wantErr)
			}
		})
	}
}

func TestLimitsDefaults(t *testing.T) {
	got := Limits{MemoryBytes: 64 << 20}.WithDefaults()
	d := DefaultLimits()
	if got.MemoryBytes != 64<<20 || got.WallTime != d.WallTime || got.Pids != d.Pids || got.CPUs != d.CPUs {
		t.Fatalf("WithDefaults kept or filled the wrong fields: %+v", got)
	}
	if err := got.validate(); err != nil {
		t.Fatal(err)
	}
}

func TestClassify(t *testing.T) {
	l := DefaultLimits()
	exited := func(code int) exitInfo { return exitInfo{Exited: true, ExitCode: code} }
	cases := []struct {
		name   string
		end    ending
		want   Status
		reason string
	}{
		{"clean exit", ending{exit: exited(0), haveExit: true}, StatusOK, ""},
		{"non-zero exit", ending{exit: exited(2), haveExit: true}, StatusError, ""},
		{"signal", ending{exit: exitInfo{Signal: 11}, haveExit: true}, StatusError, ""},
		{"wall timeout wins over its SIGKILL", ending{exit: exitInfo{Signal: sigKill}, haveExit: true, wallTimeout: true}, StatusTimeout, "wall time"},
		{"cpu timeout", ending{cpuTimeout: true}, StatusTimeout, "cpu time"},
		{"RLIMIT_CPU signal", ending{exit: exitInfo{Signal: sigXCPU}, haveExit: true}, StatusTimeout, "cpu time"},
		{"file size signal", ending{exit: exitInfo{Signal: sigXFSZ}, haveExit: true}, StatusError, "file size"},
		{"oom", ending{exit: exitInfo{Signal: sigKill}, haveExit: true, oomKilled: true}, StatusOOM, "memory limit"},
		{"output limit wins", ending{outputLimit: Stdout, wallTimeout: true}, StatusOutputLimit, "stdout exceeded"},
		{"cancelled", ending{cancelled: true}, StatusKilled, "killed on request"},
		{"no exit report", ending{}, StatusKilled, "before the payload reported"},
		{"no exit report, init said why", ending{initSaid: "runtime: failed to create new OS thread"}, StatusKilled,
			"before the payload reported an exit status; its init said: runtime: failed to create new OS thread"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.end.limits = l
			got, reason := c.end.classify()
			if got != c.want || !strings.Contains(reason, c.reason) {
				t.Fatalf("classify = %s %q, want %s containing %q", got, reason, c.want, c.reason)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	if got := (exitInfo{Exited: true, ExitCode: 3}).exitCode(); got != 3 {
		t.Errorf("exit 3 → %d", got)
	}
	if got := (exitInfo{Signal: 9}).exitCode(); got != 137 {
		t.Errorf("SIGKILL → %d, want 137", got)
	}
}

func TestCaptureCapsAndReportsOnce(t *testing.T) {
	var mu sync.Mutex
	var live []byte
	var limits []Stream
	c := &capture{stream: Stderr, limit: 10,
		live:    func(s Stream, p []byte) { mu.Lock(); live = append(live, p...); mu.Unlock() },
		onLimit: func(s Stream) { limits = append(limits, s) },
	}
	c.drain(strings.NewReader("0123456789abcdef"), make([]byte, captureChunk))
	c.add([]byte("more"))
	buf, trunc := c.result()
	if string(buf) != "0123456789" || !trunc {
		t.Fatalf("kept %q truncated=%v", buf, trunc)
	}
	if string(live) != "0123456789" {
		t.Errorf("live got %q: bytes past the cap must not be delivered", live)
	}
	if len(limits) != 1 || limits[0] != Stderr {
		t.Errorf("onLimit called %v, want once for stderr", limits)
	}
}

func TestCaptureUnderLimit(t *testing.T) {
	c := &capture{stream: Stdout, limit: 100}
	c.drain(strings.NewReader("hello"), make([]byte, captureChunk))
	buf, trunc := c.result()
	if string(buf) != "hello" || trunc {
		t.Fatalf("kept %q truncated=%v", buf, trunc)
	}
}

func TestWireRoundTrip(t *testing.T) {
	r, w := ioPipe()
	wr := newWire(r, w)
	go func() {
		_ = wr.send(message{Kind: kindError, Error: &initError{Step: "pivot_root", Message: "EINVAL"}})
	}()
	_, err := wr.expect(kindReady)
	var ie *initError
	if !errors.As(err, &ie) || ie.Step != "pivot_root" {
		t.Fatalf("expect returned %v, want the init error", err)
	}
}

func TestCheckPathLimits(t *testing.T) {
	tests := []struct {
		name, path, err string
	}{
		{"as deep as allowed", strings.Repeat("d/", MaxPathDepth-1) + "f", ""},
		{"dots and empty components do not count", strings.Repeat("./", 100) + strings.Repeat("d//", MaxPathDepth-1) + "f", ""},
		{"one level too deep", strings.Repeat("d/", MaxPathDepth) + "f", "more than 64 components"},
		{"as long as allowed", strings.Repeat(strings.Repeat("n", 254)+"/", 4) + strings.Repeat("f", MaxPathBytes-4*255), ""},
		{"one byte too long", strings.Repeat("n", 200) + "/" + strings.Repeat("f", MaxPathBytes-200), "path is 1025 bytes long; the limit is 1024"},
		{"a name as long as allowed", strings.Repeat("n", MaxNameBytes), ""},
		{"a name too long", "a/" + strings.Repeat("n", MaxNameBytes+1), "path component of 256 bytes; the limit is 255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckPathLimits(tt.path)
			if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("CheckPathLimits = %v, want %q", err, tt.err)
			}
			if tt.err != "" {
				s := Spec{Argv: []string{"/usr/bin/python3"}, Files: []File{{Path: tt.path}}}
				if err := s.Validate(); !errors.Is(err, ErrInvalidSpec) {
					t.Errorf("a spec with that file: %v, want ErrInvalidSpec", err)
				}
			}
		})
	}
}
