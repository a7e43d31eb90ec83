package runner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// stateBuffer is a StateSink that keeps the state in memory.
type stateBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	err  error
	ends int
}

func (b *stateBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *stateBuffer) End(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err, b.ends = err, b.ends+1
}

// save makes k save its state and returns it with what k said of it.
func (k *kernel) save() ([]byte, StateMeta) {
	k.t.Helper()
	sink := &stateBuffer{}
	var meta StateMeta
	k.scan.ExpectState(func(m StateMeta) StateSink { meta = m; return sink })
	c := k.wait(k.send(SaveRequest))
	if c.report.Error != nil {
		k.t.Fatalf("save failed: %s\n%s", c.report.Error.Value, c.report.Error.Traceback)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.ends != 1 || sink.err != nil || int64(sink.buf.Len()) != meta.Bytes {
		k.t.Fatalf("state: %d ends, error %v, %d bytes of %d announced", sink.ends, sink.err, sink.buf.Len(), meta.Bytes)
	}
	return bytes.Clone(sink.buf.Bytes()), meta
}

// load makes k load state and returns what k said, or the cell's error.
func (k *kernel) load(state []byte) (Loaded, *Error) {
	k.t.Helper()
	var got Loaded
	k.scan.OnLoaded(func(l Loaded) { got = l })
	c := k.send(func(n int) []byte { return append(LoadRequest(n, int64(len(state))), state...) })
	c = k.wait(c)
	return got, c.report.Error
}

// value runs expr in k and returns its repr.
func (k *kernel) value(expr string) string {
	k.t.Helper()
	c := k.run(expr, true, 0)
	if c.report.Error != nil {
		k.t.Fatalf("%s: %s\n%s", expr, c.report.Error.Value, c.report.Error.Traceback)
	}
	if c.report.Result == nil {
		return "None"
	}
	return *c.report.Result
}

// exec runs code in k and fails the test on an error.
func (k *kernel) exec(code string) {
	k.t.Helper()
	if c := k.run(code, false, 0); c.report.Error != nil {
		k.t.Fatalf("%s\n%s", c.report.Error.Value, c.report.Error.Traceback)
	}
}

// userState is what a notebook user builds: plain data, their own
// functions and classes (a closure, a recursive function, a class with a
// property, a static and a class method, super(), __slots__, a
// dataclass, an lru_cache, an Enum), a module by alias and a module of
// their workspace.
const userState = `
import math as m, collections, functools, dataclasses, json
from helper import triple
import helper
data = {"a": [1, 2.5, "x"], "b": (None, True), "c": {1, 2}, "d": b"\x00\xff", "e": bytearray(b"ab")}
shared = [1, 2]
pair = (shared, shared)
def square(x):
    return x * x
def fact(n):
    return 1 if n < 2 else n * fact(n - 1)
def make_counter(start):
    count = start
    def step(by=1):
        nonlocal count
        count += by
        return count
    return step
counter = make_counter(10)
counter()
inc = lambda v, *, by=2: v + by
class Base:
    kind = "base"
    def __init__(self, v):
        self.v = v
    def describe(self):
        return "%s:%s" % (self.kind, self.v)
class Point(Base):
    kind = "point"
    __slots__ = ("y",)
    def __init__(self, v, y):
        super().__init__(v)
        self.y = y
    @property
    def norm(self):
        return m.hypot(self.v, self.y)
    @staticmethod
    def origin():
        return Point(0, 0)
    @classmethod
    def unit(cls):
        return cls(1, 0)
    def describe(self):
        return super().describe() + "/" + str(self.y)
p = Point(3, 4)
@dataclasses.dataclass
class Item:
    name: str
    qty: int = 1
    tags: list = dataclasses.field(default_factory=list)
item = Item("pen", 3)
@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
fib(30)
counts = collections.Counter("abracadabra")
partial_square = functools.partial(pow, exp=2)
calls = [square, fact, triple]
import enum
class Color(enum.Enum):
    RED = 1
    CRIMSON = 1
    GREEN = 2
    def warm(self):
        return self is Color.RED
shade = Color.CRIMSON
`

// checks are expressions evaluated in the saved kernel and in the
// restored one, whose reprs must match.
var checks = []string{
	"sorted(k for k in globals() if not k.startswith('__'))",
	"data", "pair[0] is pair[1]", "square(7)", "fact(10)", "counter(5)", "counter()", "inc(1)", "inc(1, by=5)",
	"p.describe(), p.norm, Point.origin().describe(), Point.unit().describe(), isinstance(p, Base)",
	"Point.__slots__, hasattr(p, '__dict__'), type(p).__name__, type(p).__qualname__, type(p).__module__",
	"item, dataclasses.asdict(item), dataclasses.fields(Item)[2].name, Item('x')",
	"fib(80), fib.cache_info().maxsize", "counts.most_common(2)", "partial_square(9)",
	"[f(3) for f in calls]", "m.pi, m is __import__('math'), helper.triple is triple",
	"json.dumps({'a': 1})", "shade, shade is Color.RED, shade.warm(), list(Color)",
}

func TestSnapshotRoundTrip(t *testing.T) {
	forEachPython(t, func(t *testing.T, python string) {
		dirA, dirB := t.TempDir(), t.TempDir()
		for _, d := range []string{dirA, dirB} {
			if err := os.WriteFile(filepath.Join(d, "helper.py"), []byte("def triple(x):\n    return 3 * x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		a := startKernelIn(t, python, dirA)
		a.exec(userState)
		state, meta := a.save()
		// The checks change the state (counter): both sides run them on
		// the state as it was saved.
		want := make([]string, len(checks))
		for i, c := range checks {
			want[i] = a.value(c)
		}
		if len(meta.Skipped) != 0 {
			t.Errorf("skipped %v", meta.Skipped)
		}
		b := startKernelIn(t, python, dirB)
		loaded, err := b.load(state)
		if err != nil {
			t.Fatalf("load: %s\n%s", err.Value, err.Traceback)
		}
		if len(loaded.Skipped) != 0 || !slices.Equal(loaded.Names, meta.Saved) {
			t.Errorf("loaded %v, skipped %v; saved %v", loaded.Names, loaded.Skipped, meta.Saved)
		}
		for i, c := range checks {
			if got := b.value(c); got != want[i] {
				t.Errorf("%s: restored %s, saved %s", c, got, want[i])
			}
		}
		// The restored functions see the restored __main__: a global set
		// after the restore is the one they read.
		b.exec("def uses_later():\n    return later\nlater = 5")
		if got := b.value("uses_later(), square.__globals__ is globals()"); got != "(5, True)" {
			t.Errorf("restored functions' globals: %s", got)
		}
		// The two kernels diverge.
		b.exec("shared.append(3)")
		if got := a.value("shared"); got != "[1, 2]" {
			t.Errorf("the saved kernel changed with the restored one: %s", got)
		}
	})
}

// blobs are out-of-band buffers as numpy's arrays hand them to pickle,
// made with the standard library alone: small and large (past the 2 MiB
// from which a load reads them into a memory map of their own), writable
// and read-only, one of a size that is not a multiple of a page.
const blobs = `
import hashlib, os, pickle
class Blob:
    def __init__(self, b):
        self.b = b
    def __reduce_ex__(self, protocol):
        return Blob, (pickle.PickleBuffer(self.b),)
    def digest(self):
        m = memoryview(self.b)
        return hashlib.sha256(m).hexdigest()[:16], m.nbytes, m.readonly
blobs = [Blob(bytearray(os.urandom(n))) for n in (10, 2 << 20, (5 << 20) + 3)] + [Blob(bytes(range(256)) * (12 << 12))]
`

// TestSnapshotLargeBuffers: buffers of every size come back equal, as
// writable as they were, and a restored kernel's state (its large buffers
// in memory maps) saves and restores again.
func TestSnapshotLargeBuffers(t *testing.T) {
	forEachPython(t, func(t *testing.T, python string) {
		digests := "[x.digest() for x in blobs]"
		a := startKernel(t, python)
		a.exec(blobs)
		want := a.value(digests)
		state, _ := a.save()
		b := startKernel(t, python)
		if _, err := b.load(state); err != nil {
			t.Fatalf("load: %s\n%s", err.Value, err.Traceback)
		}
		if got := b.value(digests); got != want {
			t.Fatalf("restored %s, saved %s", got, want)
		}
		b.exec("for x in blobs[:3]:\n    m = memoryview(x.b)\n    m[-1] = m[-1] ^ 1")
		want = b.value(digests)
		if want == a.value(digests) {
			t.Fatal("the restored buffers did not change")
		}
		state, _ = b.save()
		c := startKernel(t, python)
		if _, err := c.load(state); err != nil {
			t.Fatalf("load of the restored state: %s\n%s", err.Value, err.Traceback)
		}
		if got := c.value(digests); got != want {
			t.Errorf("restored twice %s, saved %s", got, want)
		}
	})
}

func TestSnapshotNamesWhatItCannotSave(t *testing.T) {
	k := startKernel(t, "/usr/bin/python3")
	k.exec(`
import socket, threading, time, io
sock = socket.socket()
ev = threading.Event()
worker = threading.Thread(target=ev.wait, daemon=True)
worker.start()
gen = (i for i in range(3))
lock = threading.Lock()
log = open("log.txt", "w")
inside = {"deep": [1, {"lock": lock}]}
buf = io.BytesIO(b"kept")
kept = [1, 2, 3]
`)
	_, meta := k.save()
	reasons := map[string]string{}
	for _, s := range meta.Skipped {
		reasons[s.Name] = s.Reason
	}
	for name, want := range map[string]string{
		"sock": "socket", "worker": "thread", "gen": "generator", "lock": "lock", "log": "open file",
		"inside": "lock", "ev": "lock", "socket": "", "buf": "", "kept": "",
	} {
		got, skipped := reasons[name]
		if want == "" && skipped {
			t.Errorf("%s skipped: %s", name, got)
		}
		if want != "" && !strings.Contains(got, want) {
			t.Errorf("%s: reason %q, want one naming %q (skipped: %v)", name, got, want, meta.Skipped)
		}
	}
	if !slices.Contains(meta.Saved, "buf") || !slices.Contains(meta.Saved, "kept") || slices.Contains(meta.Saved, "sock") {
		t.Errorf("saved %v", meta.Saved)
	}
	k.exec("ev.set(); worker.join(); sock.close(); log.close()")
}

func TestLoadRefusesWhatIsNotAState(t *testing.T) {
	k := startKernel(t, "/usr/bin/python3")
	k.exec("x = 1")
	for name, state := range map[string][]byte{
		"no index":          []byte("garbage that is not a state\n"),
		"sizes that lie":    []byte("PYEXSTATE1 cpython-311 100\nabc"),
		"another python":    []byte("PYEXSTATE1 cpython-27 3\nabc"),
		"no newline at all": []byte("PYEXSTATE1"),
	} {
		if _, err := k.load(state); err == nil {
			t.Errorf("%s: loaded", name)
		}
		// The kernel read all of it: the next cell runs.
		if got := k.value("x"); got != "1" {
			t.Fatalf("%s: after the refused load x is %s", name, got)
		}
	}
}

func TestStateIndex(t *testing.T) {
	for _, c := range []struct {
		line  string
		total int64
		ok    bool
	}{
		{"PYEXSTATE1 cpython-311 3 4", 27 + 7, true},
		{"PYEXSTATE1 cpython-311 3 4", 27 + 8, false},
		{"PYEXSTATE1 cpython-311", 23, false},
		{"PYEXSTATE2 cpython-311 0", 25, false},
		{"PYEXSTATE1 cpython-311 -1 2", 29, false},
	} {
		if err := CheckStateIndex([]byte(c.line), c.total); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadState)) {
			t.Errorf("%q of %d: %v", c.line, c.total, err)
		}
	}
}

func TestScannerPassesTheStateThrough(t *testing.T) {
	state := "PYEXSTATE1 t 5 3\nhello\n\n{"
	stream := `{"output": {"type": "display", "data": {"text/plain": "\"a\""}}}` + "\n" +
		`{"snapshot": {"bytes": 99}}` + "\n" + // unasked: a stray line
		`{"snapshot": {"bytes": 25, "saved": ["x"], "skipped": [{"name": "s", "reason": "a socket"}]}}` + "\n" +
		state + `{"cell": 3, "result": null, "error": null, "exit_code": 0}` + "\n" +
		`{"snapshot_loaded": {"names": ["x"], "skipped": []}}` + "\n"
	for _, size := range []int{1, 2, 7, 64, len(stream)} {
		var outputs, reports int
		var loaded Loaded
		s := NewSessionScanner(func(Output) { outputs++ }, func(int, Report) { reports++ })
		s.OnLoaded(func(l Loaded) { loaded = l })
		sink := &stateBuffer{}
		var meta StateMeta
		feed := func(part string) {
			for i := 0; i < len(part); i += size {
				s.Write([]byte(part[i:min(i+size, len(part))]))
			}
		}
		stray := strings.Index(stream, `{"snapshot": {"bytes": 25`)
		feed(stream[:stray])
		s.ExpectState(func(m StateMeta) StateSink { meta = m; return sink })
		feed(stream[stray:])
		if sink.buf.String() != state || sink.ends != 1 || sink.err != nil || outputs != 1 || reports != 1 ||
			meta.Bytes != 25 || meta.Skipped[0].Reason != "a socket" || len(loaded.Names) != 1 {
			t.Errorf("chunks of %d: state %q ends %d err %v outputs %d reports %d meta %+v loaded %+v",
				size, sink.buf.String(), sink.ends, sink.err, outputs, reports, meta, loaded)
		}
	}
}

func TestScannerRefusesABadIndex(t *testing.T) {
	sink := &stateBuffer{}
	s := NewSessionScanner(func(Output) {}, func(int, Report) {})
	s.ExpectState(func(StateMeta) StateSink { return sink })
	s.Write([]byte(`{"snapshot": {"bytes": 10}}` + "\nPYEXSTATE1 t 9\n" + `{"cell": 1, "result": null, "error": null, "exit_code": 0}` + "\n"))
	if sink.buf.Len() != 0 || !errors.Is(sink.err, ErrBadState) || sink.ends != 1 {
		t.Errorf("got %q, %v, %d ends", sink.buf.String(), sink.err, sink.ends)
	}
}

func TestScannerDropsEndlessLines(t *testing.T) {
	var reports int
	s := NewSessionScanner(func(Output) {}, func(int, Report) { reports++ })
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for range 40 { // a line of 40 MiB, written by the user's code
		s.Write(chunk)
	}
	if len(s.partial) > maxLine {
		t.Fatalf("holds %d bytes of one line", len(s.partial))
	}
	s.Write([]byte(`{"cell": 1}` + "\n" + `{"cell": 2, "result": null, "error": null, "exit_code": 0}` + "\n"))
	if reports != 1 {
		t.Fatalf("%d reports after the endless line, want the one that followed it", reports)
	}
}

// pullingBuffer is a sink that pulls the rest of a state from src (as a
// splice from the channel would), at most max bytes, then fails with err.
type pullingBuffer struct {
	stateBuffer
	src    *[]byte
	max    int64
	err    error
	pulls  int
	before int // the bytes the sink had at the pull
}

func (b *pullingBuffer) Pull(n int64) (int64, error) {
	b.pulls++
	b.before = b.buf.Len()
	if int64(b.before)+n != int64(len(testState)) {
		return 0, fmt.Errorf("asked to pull %d bytes after %d", n, b.before)
	}
	m := min(n, b.max)
	b.buf.Write((*b.src)[:m])
	*b.src = (*b.src)[m:]
	if m < n {
		return m, b.err
	}
	return m, nil
}

const testState = "PYEXSTATE1 t 5 30\nhello" + "ssssssssssssssssssssssssssssss"

// TestScannerLetsTheSinkPullTheState: a sink that can take the state
// itself does so once the index line is whole and checked, for exactly
// the bytes not yet delivered; the channel's next line is read as
// before. When the pull stops short, the rest goes by unused and the sink
// hears why.
func TestScannerLetsTheSinkPullTheState(t *testing.T) {
	report := `{"cell": 3, "result": null, "error": null, "exit_code": 0}` + "\n"
	head := `{"snapshot": {"bytes": 53}}` + "\n"
	stream := head + testState + report
	broken := errors.New("the child ended")
	for _, max := range []int64{1 << 20, 10} {
		for _, size := range []int{1, 7, 40, len(head) + 20} {
			rest := []byte(stream)
			sink := &pullingBuffer{src: &rest, max: max, err: broken}
			var reports int
			s := NewSessionScanner(func(Output) {}, func(int, Report) { reports++ })
			s.ExpectState(func(StateMeta) StateSink { return sink })
			for len(rest) > 0 {
				part := rest[:min(size, len(rest))]
				rest = rest[len(part):]
				s.Write(part)
			}
			want, err := testState, error(nil)
			if short := sink.before + int(max); short < len(testState) {
				want, err = testState[:short], broken
			}
			if sink.buf.String() != want || sink.ends != 1 || !errors.Is(sink.stateBuffer.err, err) || reports != 1 || sink.pulls != 1 {
				t.Errorf("pull of at most %d, chunks of %d: state %q ends %d err %v reports %d pulls %d",
					max, size, sink.buf.String(), sink.ends, sink.stateBuffer.err, reports, sink.pulls)
			}
		}
	}
}
