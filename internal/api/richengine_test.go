package api

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/runner/runnertest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// newRichServer serves the API over the real engine with artifact storage
// and an interpreter that has pandas and matplotlib.
func newRichServer(t *testing.T) *httptest.Server {
	t.Helper()
	python, mount := runnertest.RichPython(t)
	eng := enginetest.Start(t, engine.Config{Concurrency: 2, DefaultTimeout: 60 * time.Second},
		func(st *store.NATS, _ *sandbox.Manager) engine.Deps {
			return engine.Deps{Interpreters: enginetest.Interpreter{Path: python, Mount: mount}, Artifacts: st}
		})
	s, err := New(eng, Options{Config: config.Default(), Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// evalJSON posts an eval request and decodes the result.
func evalJSON(t *testing.T, ts *httptest.Server, req map[string]any) ExecutionResult {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	code, _, resp := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json", body, nil)
	if code != 200 {
		t.Fatalf("eval: %d %s", code, resp)
	}
	return decode[ExecutionResult](t, resp)
}

// rawOf is the JSON of mime's value in an output.
func rawOf(t *testing.T, o Output, mime string) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(o.Data[mime])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// textOf is the string content of mime in an output.
func textOf(t *testing.T, o Output, mime string) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(rawOf(t, o, mime), &s); err != nil {
		t.Fatalf("%s of a %s output: %v (bundle has %v)", mime, o.Type, err, keys(o.Data))
	}
	return s
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestRichOverHTTP is issue 5's "what must be shown" for rich output and
// files, through the HTTP API on the real jail.
func TestRichOverHTTP(t *testing.T) {
	ts := newRichServer(t)
	code := func(s string) map[string]any { return map[string]any{"code": s} }

	cases := []struct {
		name  string
		req   map[string]any
		check func(t *testing.T, r ExecutionResult)
	}{
		{name: "a plot returns a PNG that decodes",
			req: code("import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 3, 2])\nplt.show()\n"),
			check: func(t *testing.T, r ExecutionResult) {
				if len(r.Outputs) != 1 || r.Outputs[0].Type != "display" {
					t.Fatalf("outputs = %+v, want one display", r.Outputs)
				}
				if w, h := runnertest.PNGSize(t, textOf(t, r.Outputs[0], "image/png")); w != 400 || h != 300 {
					t.Errorf("image is %dx%d, want 400x300 (4x3 inches at 100 dpi)", w, h)
				}
			}},
		{name: "a DataFrame returns HTML and JSON",
			req: map[string]any{"code": "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima', 'Pune'], 'temp': [3, 19, 31]})\ndf",
				"eval_last_expr": true, "max_rows": 2},
			check: func(t *testing.T, r ExecutionResult) {
				if len(r.Outputs) != 1 || r.Outputs[0].Type != "result" {
					t.Fatalf("outputs = %+v, want one result", r.Outputs)
				}
				o := r.Outputs[0]
				if html := textOf(t, o, "text/html"); !strings.Contains(html, "<table") || !strings.Contains(html, "Oslo") {
					t.Errorf("text/html = %.200s", html)
				}
				var table struct {
					Columns   []string         `json:"columns"`
					Records   []map[string]any `json:"records"`
					TotalRows int              `json:"total_rows"`
					Truncated bool             `json:"truncated"`
				}
				if err := json.Unmarshal(rawOf(t, o, "application/json"), &table); err != nil {
					t.Fatal(err)
				}
				if len(table.Records) != 2 || table.Records[1]["city"] != "Lima" || table.TotalRows != 3 || !table.Truncated ||
					strings.Join(table.Columns, ",") != "city,temp" {
					t.Errorf("application/json = %s", rawOf(t, o, "application/json"))
				}
			}},
		{name: "display of two objects yields two outputs in order",
			req: code("display({'first': 1}, 'second')\n"),
			check: func(t *testing.T, r ExecutionResult) {
				if len(r.Outputs) != 2 || textOf(t, r.Outputs[0], "text/plain") != "{'first': 1}" || textOf(t, r.Outputs[1], "text/plain") != "'second'" {
					t.Fatalf("outputs = %+v", r.Outputs)
				}
			}},
		{name: "a class with _repr_html_",
			req: code("class Badge:\n    def _repr_html_(self):\n        return '<b>ok</b>'\ndisplay(Badge())\n"),
			check: func(t *testing.T, r ExecutionResult) {
				if len(r.Outputs) != 1 || textOf(t, r.Outputs[0], "text/html") != "<b>ok</b>" {
					t.Fatalf("outputs = %+v", r.Outputs)
				}
			}},
		{name: "the results dict is returned",
			req: code("results = {'rows': 3, 'mean': 1.5, 'labels': ['a', 'b']}\n"),
			check: func(t *testing.T, r ExecutionResult) {
				var got struct {
					Rows   int      `json:"rows"`
					Mean   float64  `json:"mean"`
					Labels []string `json:"labels"`
				}
				if err := json.Unmarshal(r.Results, &got); err != nil || got.Rows != 3 || got.Mean != 1.5 || len(got.Labels) != 2 {
					t.Fatalf("results = %s (%v)", r.Results, err)
				}
			}},
		{name: "dataframes are loaded before the code runs",
			req: map[string]any{"files": []map[string]string{{"name": "main.py", "content": "print(df['n'].sum())"}, {"name": "data.csv", "content": "n\n4\n5\n"}},
				"dataframes": map[string]string{"df": "data.csv"}},
			check: func(t *testing.T, r ExecutionResult) {
				if r.Stdout != "9\n" || r.ExitCode != 0 {
					t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
				}
			}},
		{name: "error on line 3 without eval_last_expr",
			req: code("a = 1\nb = 2\nc = a / 0\n"),
			check: func(t *testing.T, r ExecutionResult) {
				if r.ErrorType != "ZeroDivisionError" || r.ErrorLine != 3 || r.ExitCode == 0 {
					t.Fatalf("error %s line %d exit %d", r.ErrorType, r.ErrorLine, r.ExitCode)
				}
			}},
		{name: "error on line 3 with eval_last_expr",
			req: map[string]any{"code": "a = 1\nb = 2\nundefined + a\n", "eval_last_expr": true},
			check: func(t *testing.T, r ExecutionResult) {
				if r.ErrorType != "NameError" || r.ErrorLine != 3 || r.ExitCode == 0 {
					t.Fatalf("error %s line %d exit %d", r.ErrorType, r.ErrorLine, r.ExitCode)
				}
			}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			r := evalJSON(t, ts, tt.req)
			if r.Status != "completed" {
				t.Fatalf("status %s: %s %s", r.Status, r.Error, r.Stderr)
			}
			tt.check(t, r)
		})
	}

	t.Run("files are artifacts downloadable byte for byte", func(t *testing.T) {
		input := binaryData(256)
		script := `import hashlib, os, shutil
import matplotlib.pyplot as plt
os.makedirs("out")
with open("out/report.csv", "w") as f:
    f.write("city,temp\nOslo,3\n")
plt.plot([1, 2])
plt.savefig("chart.png")
plt.close("all")
shutil.copy("input.bin", "out/copy.bin")
os.symlink("/etc/passwd", "passwd")
os.symlink("../../../../etc/passwd", "out/escape")
for p in ("out/report.csv", "chart.png", "input.bin"):
    print(p, hashlib.sha256(open(p, "rb").read()).hexdigest())
`
		r := evalJSON(t, ts, map[string]any{"files": []map[string]string{
			{"name": "main.py", "content": script},
			{"name": "input.bin", "content": base64.StdEncoding.EncodeToString(input), "encoding": "base64"},
		}})
		if r.Status != "completed" || r.ExitCode != 0 {
			t.Fatalf("%s exit %d: %s", r.Status, r.ExitCode, r.Stderr)
		}
		inJail := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			p, sum, _ := strings.Cut(line, " ")
			inJail[p] = sum
		}
		if inJail["input.bin"] != sha(input) {
			t.Errorf("the binary input file changed on the way in: sha256 %s in the jail, %s sent", inJail["input.bin"], sha(input))
		}
		listed := map[string]FileInfo{}
		for _, f := range r.Files {
			listed[f.Path] = f
		}
		if len(listed) != 3 || listed["out/report.csv"].MIME != "text/csv" || listed["chart.png"].MIME != "image/png" || listed["out/copy.bin"].Size != 256 {
			t.Fatalf("files = %+v, want out/report.csv, chart.png and out/copy.bin (no symlinks, no unchanged input)", r.Files)
		}
		want := map[string]string{"out/report.csv": inJail["out/report.csv"], "chart.png": inJail["chart.png"], "out/copy.bin": sha(input)}
		for p, sum := range want {
			code, hdr, body := call(t, ts, http.MethodGet, "/api/v1/executions/"+r.ExecutionID+"/files/"+p, "", nil, nil)
			if code != 200 || sha(body) != sum || listed[p].SHA256 != sum || hdr.Get("ETag") != `"`+sum+`"` {
				t.Errorf("%s: status %d, downloaded sha256 %s, listed %s, ETag %s; written %s", p, code, sha(body), listed[p].SHA256, hdr.Get("ETag"), sum)
			}
		}
		if _, err := png.Decode(bytes.NewReader(mustDownload(t, ts, r.ExecutionID, "chart.png"))); err != nil {
			t.Errorf("chart.png does not decode: %v", err)
		}
		for _, p := range []string{"passwd", "out/escape", "../../../../etc/passwd", url.PathEscape("../../etc/passwd")} {
			code, _, body := call(t, ts, http.MethodGet, "/api/v1/executions/"+r.ExecutionID+"/files/"+p, "", nil, nil)
			if code != 404 || bytes.Contains(body, []byte("root:")) {
				t.Errorf("%s: %d %s, want 404 file not found", p, code, body)
			}
		}
		code, _, body := call(t, ts, http.MethodGet, "/api/v1/executions/"+r.ExecutionID+"/files", "", nil, nil)
		if list := decode[FileList](t, body); code != 200 || len(list.Files) != 3 {
			t.Errorf("list: %d %s", code, body)
		}
	})

	t.Run("display events stream live", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// Submit with the multipart API, then follow: the display event
		// comes before the stdout printed after it.
		tarData := makeTar(t, tar.FormatPAX, tarEntry{Name: "main.py", Body: "import time\ndisplay('early')\ntime.sleep(0.5)\nprint('late')\n"})
		ct, mp := multipartBody(t, tarData, `{}`, metaJSONPart)
		code, _, resp := call(t, ts, http.MethodPost, "/api/v1/exec/async", ct, mp, nil)
		if code != http.StatusAccepted {
			t.Fatalf("async: %d %s", code, resp)
		}
		id := decode[AsyncAccepted](t, resp).ExecutionID
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/v1/executions/"+id+"/events", nil)
		req.Header.Set("Accept", ndjsonType)
		res, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var types []string
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			ev := decode[Event](t, sc.Bytes())
			if ev.Type == "display" {
				var o Output
				if err := json.Unmarshal([]byte(ev.Data), &o); err != nil || textOf(t, o, "text/plain") != "'early'" {
					t.Errorf("display event data %s (%v)", ev.Data, err)
				}
			}
			if ev.Type != "status" {
				types = append(types, ev.Type)
			}
		}
		if strings.Join(types, ",") != "display,stdout" {
			t.Errorf("events %v, want display then stdout", types)
		}
	})
}

func mustDownload(t *testing.T, ts *httptest.Server, id, p string) []byte {
	t.Helper()
	code, _, body := call(t, ts, http.MethodGet, "/api/v1/executions/"+id+"/files/"+p, "", nil, nil)
	if code != 200 {
		t.Fatalf("download %s: %d %s", p, code, body)
	}
	return body
}
