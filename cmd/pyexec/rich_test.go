package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinyPNG is a 3×2 PNG.
func tinyPNG(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// richAPI serves a result with rich outputs and files, the files
// themselves, and records the metadata of exec requests.
func richAPI(t *testing.T, files map[string]string) (url string, metadata chan map[string]any) {
	t.Helper()
	metadata = make(chan map[string]any, 1)
	var listed []map[string]any
	for p, content := range files {
		listed = append(listed, map[string]any{"path": p, "size": len(content), "sha256": "00", "mime": "text/csv"})
	}
	result, err := json.Marshal(map[string]any{
		"execution_id": "exe_r", "status": "completed", "exit_code": 0, "stdout": "done\n",
		"outputs": []map[string]any{
			{"type": "display", "data": map[string]string{"text/plain": "<Figure>", "image/png": base64.StdEncoding.EncodeToString(tinyPNG(t))}},
			{"type": "display", "data": map[string]string{"text/plain": "df", "text/html": "<table/>"}},
			{"type": "display", "data": map[string]string{"text/plain": "'just text'"}},
		},
		"files": listed, "files_omitted": 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/exec/sync", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseMultipartForm(1 << 20); err == nil {
			var m map[string]any
			json.Unmarshal([]byte(r.FormValue("metadata")), &m)
			select {
			case metadata <- m: // the first request's, for the test that reads it
			default:
			}
		}
		w.Write(result)
	})
	mux.HandleFunc("GET /api/v1/executions/exe_r/files", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"execution_id": "exe_r", "files": listed})
	})
	mux.HandleFunc("GET /api/v1/executions/{id}/files/{path...}", func(w http.ResponseWriter, r *http.Request) {
		content, ok := files[r.PathValue("path")]
		if r.PathValue("id") != "exe_r" || !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"file not found"}`)
			return
		}
		io.WriteString(w, content)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, metadata
}

func TestRunRichNotes(t *testing.T) {
	url, _ := richAPI(t, map[string]string{"out/report.csv": "a,b\n1,2\n"})
	script := writeScript(t, "plot.py", "")
	tests := []struct {
		name       string
		flags      []string
		wantStderr string
	}{
		{"one line per output and file", nil,
			"[image/png 3x2]\n[text/html]\n[text/plain] 'just text'\n[file out/report.csv 8 B]\n[2 more files left out by the server's limits]\n"},
		{"quiet prints none", []string{"-q"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(append([]string{"run", "--server", url, script}, tt.flags...)...)
			if code != 0 || stdout != "done\n" || stderr != tt.wantStderr {
				t.Fatalf("exit %d stdout %q\nstderr %q\nwant   %q", code, stdout, stderr, tt.wantStderr)
			}
		})
	}
}

func TestRunCollectAndOutputsDir(t *testing.T) {
	url, metadata := richAPI(t, map[string]string{"out/report.csv": "a,b\n1,2\n", "chart.svg": "<svg/>"})
	dir := filepath.Join(t.TempDir(), "results")
	code, _, stderr := runCLI("run", "--server", url, "-q", "--collect", "out/*.csv", "--collect", "*.svg", "--outputs-dir", dir, writeScript(t, "plot.py", ""))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m := <-metadata
	if fmt.Sprint(m["collect"]) != "[out/*.csv *.svg]" {
		t.Errorf("metadata collect = %v", m["collect"])
	}
	want := map[string][]byte{"output-1.png": tinyPNG(t), "out/report.csv": []byte("a,b\n1,2\n"), "chart.svg": []byte("<svg/>")}
	for p, content := range want {
		got, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || !bytes.Equal(got, content) {
			t.Errorf("%s = %q (%v), want %q", p, got, err, content)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 { // output-1.png, chart.svg, out/
		t.Errorf("outputs dir holds %d entries, want 3 (only images are saved from outputs)", len(entries))
	}
}

func TestOutputsDirRefusesPathsOutside(t *testing.T) {
	url, _ := richAPI(t, map[string]string{"../escape.txt": "x"})
	base := t.TempDir()
	dir := filepath.Join(base, "results")
	code, _, stderr := runCLI("run", "--server", url, "-q", "--outputs-dir", dir, writeScript(t, "a.py", ""))
	if code == 0 || !strings.Contains(stderr, `the server named a file outside the workspace: "../escape.txt"`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(base, "escape.txt")); err == nil {
		t.Error("a file was written outside the outputs dir")
	}
}

func TestFilesCommand(t *testing.T) {
	url, _ := richAPI(t, map[string]string{"out/report.csv": "a,b\n1,2\n"})
	out := filepath.Join(t.TempDir(), "report.csv")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "list", args: []string{"exe_r"},
			wantStdout: "PATH            SIZE  TYPE      SHA256\nout/report.csv  8 B   text/csv  00\n"},
		{name: "list quiet", args: []string{"-q", "exe_r"}, wantStdout: "out/report.csv\n"},
		{name: "download to stdout", args: []string{"exe_r", "out/report.csv"}, wantStdout: "a,b\n1,2\n"},
		{name: "download to a file", args: []string{"exe_r", "out/report.csv", "-o", out}},
		{name: "unknown file", args: []string{"exe_r", "nope.csv"}, wantCode: 1, wantStderr: "Error: file not found (HTTP 404)\n"},
		{name: "-o without a path", args: []string{"exe_r", "-o", out}, wantCode: 1,
			wantStderr: "Error: -o needs a file path to download; to save every file use \"pyexec run --outputs-dir\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(append([]string{"files", "--server", url}, tt.args...)...)
			if code != tt.wantCode || stdout != tt.wantStdout || stderr != tt.wantStderr {
				t.Fatalf("exit %d stdout %q stderr %q\nwant exit %d stdout %q stderr %q", code, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
	if got, err := os.ReadFile(out); err != nil || string(got) != "a,b\n1,2\n" {
		t.Errorf("-o file = %q (%v)", got, err)
	}
}

func TestHumanSize(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1229, "1.2 KiB"}, {5 << 20, "5.0 MiB"}, {3 << 40, "3.0 TiB"}} {
		t.Run(tt.want, func(t *testing.T) {
			if got := humanSize(tt.n); got != tt.want {
				t.Errorf("humanSize(%d) = %q, want %q", tt.n, got, tt.want)
			}
		})
	}
}
