package runner

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"reflect"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/runner/runnertest"
)

// text decodes a text MIME entry of an output.
func text(t *testing.T, o Output, mime string) string {
	t.Helper()
	raw, ok := o.Data[mime]
	if !ok {
		t.Fatalf("output has no %s: %v", mime, keys(o))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a JSON string: %v", mime, err)
	}
	return s
}

func keys(o Output) []string {
	var ks []string
	for k := range o.Data {
		ks = append(ks, k)
	}
	return ks
}

// TestDriverRichOutputs covers display() and the _repr_*_ protocol, which
// need nothing but the standard library, on every interpreter.
func TestDriverRichOutputs(t *testing.T) {
	cases := []struct {
		name  string
		code  string
		eval  bool
		check func(t *testing.T, rep Report)
	}{
		{name: "display of two objects yields two outputs in order",
			code: "display('first')\nprint('between')\ndisplay([1, 2])\n",
			check: func(t *testing.T, rep Report) {
				if len(rep.Outputs) != 2 {
					t.Fatalf("%d outputs, want 2: %+v", len(rep.Outputs), rep.Outputs)
				}
				for i, want := range []string{"'first'", "[1, 2]"} {
					if rep.Outputs[i].Type != OutputDisplay || text(t, rep.Outputs[i], "text/plain") != want {
						t.Errorf("output %d: %s %q, want display %q", i, rep.Outputs[i].Type,
							text(t, rep.Outputs[i], "text/plain"), want)
					}
				}
			}},
		{name: "display of several objects in one call",
			code: "display(1, 2, 3)\n",
			check: func(t *testing.T, rep Report) {
				if len(rep.Outputs) != 3 || text(t, rep.Outputs[2], "text/plain") != "3" {
					t.Errorf("outputs %+v, want 1, 2, 3", rep.Outputs)
				}
			}},
		{name: "a _repr_html_ class",
			code: "class T:\n    def _repr_html_(self):\n        return '<b>bold</b>'\n    def __repr__(self):\n        return 'T()'\ndisplay(T())\n",
			check: func(t *testing.T, rep Report) {
				if len(rep.Outputs) != 1 {
					t.Fatalf("%d outputs, want 1", len(rep.Outputs))
				}
				o := rep.Outputs[0]
				if text(t, o, "text/html") != "<b>bold</b>" || text(t, o, "text/plain") != "T()" {
					t.Errorf("bundle %v", o.Data)
				}
			}},
		{name: "every _repr_ method becomes a MIME type",
			code: "class R:\n" +
				"    def _repr_png_(self): return b'\\x89PNG'\n" +
				"    def _repr_jpeg_(self): return None\n" +
				"    def _repr_svg_(self): return '<svg/>'\n" +
				"    def _repr_markdown_(self): return '# md'\n" +
				"    def _repr_latex_(self): return '$x$'\n" +
				"    def _repr_json_(self): return {'k': [1, 2.5, None]}\n" +
				"    def _repr_html_(self): raise ValueError('broken repr is skipped')\n" +
				"display(R())\n",
			check: func(t *testing.T, rep Report) {
				o := rep.Outputs[0]
				if got := text(t, o, "image/png"); got != base64.StdEncoding.EncodeToString([]byte("\x89PNG")) {
					t.Errorf("image/png %q is not the base64 of the bytes", got)
				}
				for mime, want := range map[string]string{"image/svg+xml": "<svg/>", "text/markdown": "# md", "text/latex": "$x$"} {
					if got := text(t, o, mime); got != want {
						t.Errorf("%s %q, want %q", mime, got, want)
					}
				}
				if got := string(o.Data["application/json"]); got != `{"k":[1,2.5,null]}` {
					t.Errorf("application/json %s", got)
				}
				for _, absent := range []string{"image/jpeg", "text/html"} {
					if _, ok := o.Data[absent]; ok {
						t.Errorf("%s present though its method returned None or raised", absent)
					}
				}
			}},
		{name: "_repr_mimebundle_ and metadata",
			code: "class B:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n" +
				"        return {'text/html': '<i>b</i>'}, {'text/html': {'isolated': True}}\ndisplay(B())\n",
			check: func(t *testing.T, rep Report) {
				o := rep.Outputs[0]
				if text(t, o, "text/html") != "<i>b</i>" || string(o.Metadata) != `{"text/html":{"isolated":true}}` {
					t.Errorf("bundle %v metadata %s", o.Data, o.Metadata)
				}
			}},
		{name: "a __getattr__ that answers everything is not rich",
			code: "class A:\n    def __getattr__(self, name):\n        return lambda: '<html>'\n    def __repr__(self):\n        return 'A'\ndisplay(A())\n",
			check: func(t *testing.T, rep Report) {
				if got := keys(rep.Outputs[0]); !reflect.DeepEqual(got, []string{"text/plain"}) {
					t.Errorf("MIME types %v, want only text/plain", got)
				}
			}},
		{name: "raw display of a bundle",
			code: "display({'text/markdown': '*x*'}, raw=True)\n",
			check: func(t *testing.T, rep Report) {
				if text(t, rep.Outputs[0], "text/markdown") != "*x*" {
					t.Errorf("bundle %v", rep.Outputs[0].Data)
				}
			}},
		{name: "last expression is a result output with its rich types",
			code: "class T:\n    def _repr_html_(self):\n        return '<p>t</p>'\n    def __repr__(self):\n        return 'T'\ndisplay(1)\nT()\n",
			eval: true,
			check: func(t *testing.T, rep Report) {
				if len(rep.Outputs) != 2 {
					t.Fatalf("%d outputs, want display then result", len(rep.Outputs))
				}
				o := rep.Outputs[1]
				if o.Type != OutputResult || text(t, o, "text/html") != "<p>t</p>" || text(t, o, "text/plain") != "T" {
					t.Errorf("result output %s %v", o.Type, o.Data)
				}
				if rep.Result == nil || *rep.Result != "T" {
					t.Errorf("result %v, want the repr T", rep.Result)
				}
			}},
		{name: "results dict is returned as JSON",
			code: "results = {'n': 3, 'mean': 2.5, 'tags': ('a', 'b'), 'nan': float('nan'), 1: {'nested': True}, 'obj': object}\n",
			check: func(t *testing.T, rep Report) {
				var got map[string]any
				if err := json.Unmarshal(rep.Results, &got); err != nil {
					t.Fatalf("results %s: %v", rep.Results, err)
				}
				want := map[string]any{"n": 3.0, "mean": 2.5, "tags": []any{"a", "b"}, "nan": nil,
					"1": map[string]any{"nested": true}, "obj": "<class 'object'>"}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("results %v, want %v", got, want)
				}
			}},
		{name: "results that is not a dict is not returned",
			code: "results = [1, 2]\n",
			check: func(t *testing.T, rep Report) {
				if rep.Results != nil {
					t.Errorf("results %s, want none", rep.Results)
				}
			}},
		{name: "outputs beyond the budget are dropped, the report survives",
			code: "for i in range(8):\n    display('x' * (1 << 20))\n",
			check: func(t *testing.T, rep Report) {
				if len(rep.Outputs) != 3 || rep.OutputsDropped != 5 {
					t.Errorf("%d outputs, %d dropped; want 3 and 5", len(rep.Outputs), rep.OutputsDropped)
				}
			}},
	}
	forEachPython(t, func(t *testing.T, py string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				o := runDriver(t, py, map[string]string{"main.py": tc.code}, Options{EvalLastExpr: tc.eval}, "")
				rep := o.mustReport(t)
				if rep.Error != nil {
					t.Fatalf("error %+v\nstderr:\n%s", rep.Error, o.stderr)
				}
				tc.check(t, rep)
			})
		}
	})
}

func TestDriverErrorLineWithOutputs(t *testing.T) {
	code := "display('a')\nx = 1\nundefined_name\ndisplay('b')\n"
	forEachPython(t, func(t *testing.T, py string) {
		for _, eval := range []bool{false, true} {
			o := runDriver(t, py, map[string]string{"main.py": code}, Options{EvalLastExpr: eval}, "")
			rep := o.mustReport(t)
			if rep.Error == nil || rep.Error.Line != 3 || rep.Error.Name != "NameError" {
				t.Errorf("eval=%v: error %+v, want NameError on line 3", eval, rep.Error)
			}
			if len(rep.Outputs) != 1 {
				t.Errorf("eval=%v: %d outputs, want the one before the error", eval, len(rep.Outputs))
			}
		}
	})
}

// pngSize decodes a base64 PNG and returns its dimensions.
func pngSize(t *testing.T, b64 string) (int, int) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("image/png is not base64: %v", err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("image/png does not decode: %v", err)
	}
	if _, err := png.Decode(bytes.NewReader(raw)); err != nil {
		t.Fatalf("image/png does not decode: %v", err)
	}
	return cfg.Width, cfg.Height
}

// pngImage decodes a base64 PNG.
func pngImage(t *testing.T, b64 string) image.Image {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("not base64: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	return img
}

// TestDriverPlotsAndFrames needs pandas and matplotlib (see runnertest).
func TestDriverPlotsAndFrames(t *testing.T) {
	py, _ := runnertest.RichPython(t)
	csv := "city,temp\nOslo,3\nRome,18\nCairo,30\n"
	cases := []struct {
		name  string
		files map[string]string
		opts  Options
		check func(t *testing.T, o outcome)
	}{
		{name: "plt.show and a figure left open become two PNGs",
			files: map[string]string{"main.py": "import matplotlib.pyplot as plt\n" +
				"plt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 2, 3])\nplt.show()\n" +
				"plt.figure(figsize=(2, 1), dpi=50)\nplt.bar(['a'], [1])\n"},
			check: func(t *testing.T, o outcome) {
				if len(o.report.Outputs) != 2 {
					t.Fatalf("%d outputs, want 2", len(o.report.Outputs))
				}
				for i, want := range [][2]int{{400, 300}, {100, 50}} {
					w, h := pngSize(t, text(t, o.report.Outputs[i], "image/png"))
					if w != want[0] || h != want[1] {
						t.Errorf("figure %d is %dx%d, want %dx%d", i, w, h, want[0], want[1])
					}
				}
			}},
		{name: "a captured figure has the pixels, size and dpi of savefig's own PNG",
			files: map[string]string{"main.py": "import base64, io\nimport matplotlib.pyplot as plt\n" +
				"fig = plt.figure(figsize=(3, 2), dpi=80)\nplt.plot([1, 3, 2], label='line')\nplt.title('T')\nplt.legend()\n" +
				"b = io.BytesIO()\nfig.savefig(b, format='png')\nprint(base64.b64encode(b.getvalue()).decode())\n"},
			check: func(t *testing.T, o outcome) {
				if len(o.report.Outputs) != 1 {
					t.Fatalf("%d outputs, want 1", len(o.report.Outputs))
				}
				got, want := pngImage(t, text(t, o.report.Outputs[0], "image/png")), pngImage(t, strings.TrimSpace(o.stdout))
				if got.Bounds() != want.Bounds() || got.Bounds().Dx() != 240 || got.Bounds().Dy() != 160 {
					t.Fatalf("captured %v, savefig %v, want both 240x160", got.Bounds(), want.Bounds())
				}
				for y := range want.Bounds().Dy() {
					for x := range want.Bounds().Dx() {
						if got.At(x, y) != want.At(x, y) {
							t.Fatalf("pixel (%d, %d) is %v, savefig's %v", x, y, got.At(x, y), want.At(x, y))
						}
					}
				}
			}},
		{name: "figures as SVG on request",
			files: map[string]string{"main.py": "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n"},
			opts:  Options{FigureFormat: "svg"},
			check: func(t *testing.T, o outcome) {
				if len(o.report.Outputs) != 1 || !strings.Contains(text(t, o.report.Outputs[0], "image/svg+xml"), "<svg") {
					t.Errorf("outputs %+v, want one SVG", o.report.Outputs)
				}
			}},
		{name: "matplotlib runs on the Agg backend",
			files: map[string]string{"main.py": "import os, subprocess, sys\n" +
				"print(os.environ['MPLBACKEND'])\n"},
			check: func(t *testing.T, o outcome) {
				if o.stdout != "Agg\n" {
					t.Errorf("MPLBACKEND %q, want Agg", o.stdout)
				}
			}},
		{name: "a DataFrame returns HTML and truncated JSON records",
			files: map[string]string{"main.py": "import pandas as pd\ndf = pd.DataFrame({'n': range(10), 's': list('abcdefghij')})\ndf\n"},
			opts:  Options{EvalLastExpr: true, MaxRows: 3},
			check: func(t *testing.T, o outcome) {
				if len(o.report.Outputs) != 1 {
					t.Fatalf("%d outputs, want 1", len(o.report.Outputs))
				}
				out := o.report.Outputs[0]
				if out.Type != OutputResult || !strings.Contains(text(t, out, "text/html"), "<table") {
					t.Errorf("output %s without an HTML table", out.Type)
				}
				var j struct {
					Columns   []string         `json:"columns"`
					Records   []map[string]any `json:"records"`
					TotalRows int              `json:"total_rows"`
					Truncated bool             `json:"truncated"`
				}
				if err := json.Unmarshal(out.Data["application/json"], &j); err != nil {
					t.Fatalf("application/json: %v", err)
				}
				want := []map[string]any{{"n": 0.0, "s": "a"}, {"n": 1.0, "s": "b"}, {"n": 2.0, "s": "c"}}
				if !reflect.DeepEqual(j.Records, want) || !j.Truncated || j.TotalRows != 10 ||
					!reflect.DeepEqual(j.Columns, []string{"n", "s"}) {
					t.Errorf("json %+v", j)
				}
			}},
		{name: "a displayed Series",
			files: map[string]string{"main.py": "import pandas as pd\ndisplay(pd.Series([1.5, 2.5], name='v'))\n"},
			check: func(t *testing.T, o outcome) {
				if got := string(o.report.Outputs[0].Data["application/json"]); !strings.Contains(got, `"records":[{"v":1.5},{"v":2.5}]`) ||
					!strings.Contains(got, `"truncated":false`) {
					t.Errorf("application/json %s", got)
				}
			}},
		{name: "dataframes are loaded before the code runs",
			files: map[string]string{"data.csv": csv, "main.py": "results = {'hot': df[df.temp > 10].city.tolist()}\n"},
			opts:  Options{DataFrames: map[string]string{"df": "data.csv"}},
			check: func(t *testing.T, o outcome) {
				if string(o.report.Results) != `{"hot":["Rome","Cairo"]}` {
					t.Errorf("results %s", o.report.Results)
				}
			}},
		{name: "a missing dataframe file is the run's error",
			files: map[string]string{"main.py": "print('not reached')\n"},
			opts:  Options{DataFrames: map[string]string{"df": "absent.csv"}},
			check: func(t *testing.T, o outcome) {
				if o.report.Error == nil || o.report.Error.Name != "FileNotFoundError" || o.stdout != "" {
					t.Errorf("error %+v stdout %q, want FileNotFoundError before the code", o.report.Error, o.stdout)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := runDriver(t, py, tc.files, tc.opts, "")
			o.mustReport(t)
			if o.report.Error != nil && tc.opts.DataFrames == nil {
				t.Fatalf("error %+v\nstderr:\n%s", o.report.Error, o.stderr)
			}
			tc.check(t, o)
		})
	}
}

func TestDriverDataFramesWithoutPandas(t *testing.T) {
	py := runnertest.BasePython
	if runDriver(t, py, map[string]string{"main.py": "import pandas\n"}, Options{}, "").exitCode == 0 {
		t.Skip(py + " has pandas")
	}
	o := runDriver(t, py, map[string]string{"main.py": "print('not reached')\n", "d.csv": "a\n1\n"},
		Options{DataFrames: map[string]string{"df": "d.csv"}}, "")
	rep := o.mustReport(t)
	if rep.Error == nil || rep.Error.Name != "ImportError" || !strings.Contains(rep.Error.Value, "dataframes need pandas") {
		t.Errorf("error %+v, want a clear ImportError", rep.Error)
	}
	if o.stdout != "" {
		t.Errorf("stdout %q: the code ran", o.stdout)
	}
}

func TestOutputScanner(t *testing.T) {
	stream := `{"output":{"type":"display","data":{"text/plain":"\"a\""}}}` + "\n" +
		"user bytes\n" +
		`{"output":{"type":"result","data":{"text/plain":"2"}}}` + "\n" +
		`{"result":"2","error":null,"exit_code":0}` + "\n"
	for _, size := range []int{1, 7, len(stream)} {
		var got []string
		s := NewOutputScanner(func(o Output) { got = append(got, o.Type+":"+string(o.Data["text/plain"])) })
		for b := []byte(stream); len(b) > 0; {
			n := min(size, len(b))
			s.Write(b[:n])
			b = b[n:]
		}
		if want := []string{`display:"\"a\""`, `result:"2"`}; !reflect.DeepEqual(got, want) {
			t.Errorf("chunks of %d: outputs %v, want %v", size, got, want)
		}
	}
}

// TestScannerReportMatchesParseReport: the report a scanner builds from
// the outputs it already decoded is the report of the whole channel, in
// any chunking, including a report line that also looks like an output
// (not one of the outputs) and a channel other than what was streamed.
func TestScannerReportMatchesParseReport(t *testing.T) {
	out := func(text string) string {
		return `{"output":{"type":"display","data":{"text/plain":"` + text + `"}}}` + "\n"
	}
	channels := map[string]string{
		"outputs and user bytes": out("1") + "user bytes\n" + out("2") + `{"result":"2","error":null,"exit_code":0}` + "\n",
		"no outputs":             `{"result":null,"error":null,"exit_code":0}` + "\n",
		"report without newline": out("1") + `{"result":null,"error":null,"exit_code":3}`,
		"report that is also an output": out("1") +
			`{"output":{"type":"display","data":{"text/plain":"x"}},"result":null,"error":null,"exit_code":0}` + "\n",
		"output last, no report": out("1") + out("2"),
		"empty":                  "",
		"blank lines after":      out("1") + `{"result":null,"error":null,"exit_code":0}` + "\n\n \n",
	}
	for name, channel := range channels {
		want, wantErr := ParseReport([]byte(channel))
		for _, size := range []int{1, 5, len(channel) + 1} {
			s := NewOutputScanner(func(Output) {})
			for b := []byte(channel); len(b) > 0; {
				n := min(size, len(b))
				s.Write(b[:n])
				b = b[n:]
			}
			got, err := s.Report([]byte(channel))
			if !reflect.DeepEqual(got, want) || (err == nil) != (wantErr == nil) {
				t.Errorf("%s, chunks of %d: report %+v (%v), want %+v (%v)", name, size, got, err, want, wantErr)
			}
		}
	}
	// A capture that kept other bytes than were streamed is decoded whole.
	s := NewOutputScanner(func(Output) {})
	s.Write([]byte(out("1")))
	channel := out("1") + out("2") + `{"result":null,"error":null,"exit_code":0}` + "\n"
	rep, err := s.Report([]byte(channel))
	if err != nil || len(rep.Outputs) != 2 {
		t.Errorf("report of a longer channel: %d outputs (%v), want 2", len(rep.Outputs), err)
	}
}

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"svg", Options{FigureFormat: "svg"}, true},
		{"gif", Options{FigureFormat: "gif"}, false},
		{"negative rows", Options{MaxRows: -1}, false},
		{"dataframe", Options{DataFrames: map[string]string{"sales_2024": "in/s.csv"}}, true},
		{"dataframe name with a dash", Options{DataFrames: map[string]string{"a-b": "x.csv"}}, false},
		{"dataframe name with a digit first", Options{DataFrames: map[string]string{"1a": "x.csv"}}, false},
		{"absolute dataframe path", Options{DataFrames: map[string]string{"df": "/etc/passwd"}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.opts.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
