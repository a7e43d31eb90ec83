package executions

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/runner/runnertest"
)

// richInterpreter serves one python (with pandas and matplotlib) and the
// directory the jail must mount for it.
type richInterpreter struct{ path, mount string }

func (r richInterpreter) Lookup(string) (run.Interpreter, error) {
	in := run.Interpreter{Version: "3", Path: r.path}
	if r.mount != "" {
		in.Mounts = []string{r.mount}
	}
	return in, nil
}

// richEngine is an engine on the real jail with the runner driver, an
// interpreter that has pandas and matplotlib, and artifact storage.
func richEngine(t *testing.T) *Service {
	t.Helper()
	jail := runtest.Jails(t)
	python, mount := runnertest.RichPython(t)
	e := start(t, t.TempDir(), nodeConfig{}, jail)
	// Only this test's executions may take async jobs from the shared
	// queue.
	if err := e.node.stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return newNode(t, nodeConfig{}, Deps{Store: e.st, Runner: jail, Interpreters: richInterpreter{python, mount},
		Driver: run.RunnerDriver{}, Artifacts: e.st}).x
}

// mimeText decodes a string entry of a bundle.
func mimeText(t *testing.T, o run.Output, mime string) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(o.Data[mime], &s); err != nil {
		t.Fatalf("%s of %s output: %v (have %d types)", mime, o.Type, err, len(o.Data))
	}
	return s
}

func TestRichOutputsOnTheRealJail(t *testing.T) {
	eng := richEngine(t)
	ctx := context.Background()
	cases := []struct {
		name  string
		req   run.Request
		check func(t *testing.T, x *run.Execution)
	}{
		{name: "a plot returns a PNG that decodes",
			req: runtest.Script("import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 3, 2])\nplt.show()\n"),
			check: func(t *testing.T, x *run.Execution) {
				if len(x.Outputs) != 1 || x.Outputs[0].Type != run.OutputDisplay {
					t.Fatalf("outputs %+v, want one display", x.Outputs)
				}
				if w, h := runnertest.PNGSize(t, mimeText(t, x.Outputs[0], "image/png")); w != 400 || h != 300 {
					t.Errorf("PNG is %dx%d, want 400x300", w, h)
				}
			}},
		{name: "a DataFrame returns HTML and JSON",
			req: func() run.Request {
				r := runtest.Script("import pandas as pd\npd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']})\n")
				r.EvalLastExpr, r.MaxRows = true, 2
				return r
			}(),
			check: func(t *testing.T, x *run.Execution) {
				if len(x.Outputs) != 1 || x.Outputs[0].Type != run.OutputResult {
					t.Fatalf("outputs %+v, want one result", x.Outputs)
				}
				if !strings.Contains(mimeText(t, x.Outputs[0], "text/html"), "</table>") {
					t.Error("no HTML table")
				}
				var j struct {
					Records   []map[string]any `json:"records"`
					Truncated bool             `json:"truncated"`
				}
				if err := json.Unmarshal(x.Outputs[0].Data["application/json"], &j); err != nil || len(j.Records) != 2 || !j.Truncated {
					t.Errorf("application/json %s (%v), want 2 records, truncated", x.Outputs[0].Data["application/json"], err)
				}
				if x.Result == nil || !strings.Contains(*x.Result, "a  b") {
					t.Errorf("result %v, want the DataFrame's repr", x.Result)
				}
			}},
		{name: "display of two objects in order, a _repr_html_ class, results",
			req: runtest.Script("class H:\n    def _repr_html_(self):\n        return '<em>h</em>'\n" +
				"display('one')\ndisplay(H())\nresults = {'rows': 2, 'ok': True}\n"),
			check: func(t *testing.T, x *run.Execution) {
				if len(x.Outputs) != 2 || mimeText(t, x.Outputs[0], "text/plain") != "'one'" ||
					mimeText(t, x.Outputs[1], "text/html") != "<em>h</em>" {
					t.Errorf("outputs %+v", x.Outputs)
				}
				if string(x.Results) != `{"rows":2,"ok":true}` {
					t.Errorf("results %s", x.Results)
				}
			}},
		{name: "error_line stays the user's line with outputs",
			req: func() run.Request {
				r := runtest.Script("display(1)\nx = 2\nundefined_name\n")
				r.EvalLastExpr = true
				return r
			}(),
			check: func(t *testing.T, x *run.Execution) {
				if x.ErrorType != "NameError" || x.ErrorLine != 3 || len(x.Outputs) != 1 {
					t.Errorf("error %s on line %d with %d outputs, want NameError on 3 with 1",
						x.ErrorType, x.ErrorLine, len(x.Outputs))
				}
			}},
		{name: "dataframes are pre-loaded",
			req: func() run.Request {
				r := runtest.Script("results = {'total': int(df.n.sum())}\n")
				r.Files = append(r.Files, run.File{Path: "data.csv", Data: []byte("n\n1\n2\n4\n")})
				r.DataFrames = map[string]string{"df": "data.csv"}
				return r
			}(),
			check: func(t *testing.T, x *run.Execution) {
				if string(x.Results) != `{"total":7}` {
					t.Errorf("results %s, stderr %s", x.Results, x.Stderr)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x, err := eng.RunSync(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if x.Status != run.StatusCompleted {
				t.Fatalf("status %s (%s), stderr:\n%s", x.Status, x.Error, x.Stderr)
			}
			tc.check(t, x)
		})
	}
}

func TestDisplayEventsAreLive(t *testing.T) {
	eng := richEngine(t)
	ctx := context.Background()
	id, err := eng.Submit(ctx, runtest.Script("import sys, time\ndisplay('early')\nsys.stdin.read()\n"))
	if err != nil {
		t.Fatal(err)
	}
	events, err := follow(ctx, eng, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The payload waits on stdin (closed at once) only after its display:
	// the event must carry the bundle.
	for ev := range events {
		if ev.Type == EventDisplay {
			var o run.Output
			if err := json.Unmarshal([]byte(ev.Data), &o); err != nil || mimeText(t, o, "text/plain") != "'early'" {
				t.Errorf("display event %q: %v", ev.Data, err)
			}
			return
		}
		if ev.Type == EventStatus && run.Status(ev.Data).Final() {
			break
		}
	}
	t.Error("no display event before the end")
}

func TestFilesOnTheRealJail(t *testing.T) {
	eng := richEngine(t)
	ctx := context.Background()
	bin := make([]byte, 1024)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	req := runtest.Script("import hashlib, os, shutil\n" +
		"data = open('in/blob.bin', 'rb').read()\n" +
		"print(hashlib.sha256(data).hexdigest())\n" +
		"os.makedirs('out')\n" +
		"open('out/report.csv', 'w').write('city,temp\\nOslo,3\\n')\n" +
		"shutil.copy('in/blob.bin', 'chart.png')\n" +
		"os.symlink('/etc/passwd', 'passwd')\n")
	req.Files = append(req.Files, run.File{Path: "in/blob.bin", Data: bin})
	x, err := eng.RunSync(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	if x.Status != run.StatusCompleted || x.ExitCode != 0 || strings.TrimSpace(x.Stdout) != hex.EncodeToString(sum[:]) {
		t.Fatalf("status %s exit %d stdout %q stderr %q: the binary input did not arrive intact",
			x.Status, x.ExitCode, x.Stdout, x.Stderr)
	}
	want := map[string][]byte{"out/report.csv": []byte("city,temp\nOslo,3\n"), "chart.png": bin}
	files, err := listFiles(ctx, eng, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	slices.Sort(paths)
	if strings.Join(paths, ",") != "chart.png,out/report.csv" {
		t.Fatalf("files %v, want chart.png and out/report.csv only", paths)
	}
	for _, f := range files {
		t.Run(f.Path, func(t *testing.T) {
			r, info, err := openFile(ctx, eng, x.ID, f.Path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			s := sha256.Sum256(got)
			if !bytes.Equal(got, want[f.Path]) || info.SHA256 != hex.EncodeToString(s[:]) || info.Size != int64(len(got)) {
				t.Errorf("downloaded %d bytes (%+v), want %d bytes byte for byte", len(got), info, len(want[f.Path]))
			}
		})
	}
	if f := files[slices.IndexFunc(files, func(f run.FileInfo) bool { return f.Path == "chart.png" })]; f.MIME != "image/png" || f.Content != base64.StdEncoding.EncodeToString(bin) {
		t.Errorf("chart.png is %s, inlined %d chars; want image/png inlined", f.MIME, len(f.Content))
	}
	for _, p := range []string{"passwd", "../../etc/passwd", "/etc/passwd", "in/blob.bin"} {
		if _, _, err := openFile(ctx, eng, x.ID, p); !errors.Is(err, run.ErrFileNotFound) {
			t.Errorf("OpenFile(%q) = %v, want ErrFileNotFound", p, err)
		}
	}
	if _, _, err := openFile(ctx, eng, "exe_missing", "chart.png"); !errors.Is(err, run.ErrNotFound) {
		t.Errorf("OpenFile of a missing execution = %v, want ErrNotFound", err)
	}
}

func TestRichRequestValidation(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{}, nil)
	cases := []struct {
		name   string
		change func(*run.Request)
	}{
		{"unknown figure format", func(r *run.Request) { r.FigureFormat = "gif" }},
		{"negative max rows", func(r *run.Request) { r.MaxRows = -1 }},
		{"dataframe name", func(r *run.Request) { r.DataFrames = map[string]string{"not-valid": "main.py"} }},
		{"dataframe file not among the files", func(r *run.Request) { r.DataFrames = map[string]string{"df": "absent.csv"} }},
		{"collect pattern", func(r *run.Request) { r.Collect = []string{"a["} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := runtest.Script("pass\n")
			tc.change(&req)
			if _, err := e.eng.RunSync(context.Background(), req); !errors.Is(err, run.ErrInvalid) {
				t.Errorf("RunSync = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestFigureIsTheSameEverywhere: a figure's PNG reaches the caller of a
// synchronous run, the stored record and the event stream as the same
// bytes, with the outputs around it in the order they happened.
func TestFigureIsTheSameEverywhere(t *testing.T) {
	eng := richEngine(t)
	ctx := context.Background()
	req := runtest.Script("import matplotlib.pyplot as plt\ndisplay('<first> & café')\n" +
		"plt.figure(figsize=(2, 1), dpi=50)\nplt.plot([1, 3, 2])\nplt.show()\ndisplay('last')\n")
	x, err := eng.RunSync(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != run.StatusCompleted {
		t.Fatalf("status %s (%s), stderr:\n%s", x.Status, x.Error, x.Stderr)
	}
	stored, err := getExec(ctx, eng, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	events, err := follow(ctx, eng, x.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var live []run.Output
	for ev := range events {
		if ev.Type == EventDisplay {
			var o run.Output
			if err := json.Unmarshal([]byte(ev.Data), &o); err != nil {
				t.Fatalf("display event %.200q: %v", ev.Data, err)
			}
			live = append(live, o)
		}
	}
	// What each view shows: the texts in order, and the PNG's bytes.
	view := func(outs []run.Output) (texts []string, png []byte) {
		for _, o := range outs {
			if _, ok := o.Data["image/png"]; ok {
				b, err := base64.StdEncoding.DecodeString(mimeText(t, o, "image/png"))
				if err != nil {
					t.Fatal(err)
				}
				png = b
				texts = append(texts, "<figure>")
				continue
			}
			texts = append(texts, mimeText(t, o, "text/plain"))
		}
		return texts, png
	}
	wantTexts, wantPNG := view(x.Outputs)
	if want := []string{"'<first> & café'", "<figure>", "'last'"}; !slices.Equal(wantTexts, want) {
		t.Fatalf("sync outputs %q, want %q", wantTexts, want)
	}
	if w, h := runnertest.PNGSize(t, base64.StdEncoding.EncodeToString(wantPNG)); w != 100 || h != 50 {
		t.Errorf("PNG is %dx%d, want 100x50", w, h)
	}
	for name, outs := range map[string][]run.Output{"record": stored.Outputs, "events": live} {
		texts, png := view(outs)
		if !slices.Equal(texts, wantTexts) || !bytes.Equal(png, wantPNG) {
			t.Errorf("%s: outputs %q with a %d-byte PNG, want %q with the sync run's %d bytes",
				name, texts, len(png), wantTexts, len(wantPNG))
		}
	}
}
