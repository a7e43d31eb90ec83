package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
)

// idRich is a fake execution with rich outputs and files.
const idRich = "exe_00000000-0000-4000-8000-000000000005"

// fakeFileData is the content the fake engine serves for a file: fixed
// per path, with bytes that are not text.
func fakeFileData(p string) []byte { return []byte("bytes of " + p + "\x00\xff\n") }

func fakeFileInfo(p, mime string) engine.FileInfo {
	data := fakeFileData(p)
	sum := sha256.Sum256(data)
	return engine.FileInfo{Path: p, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), MIME: mime}
}

// withRichRecord adds idRich to f: two outputs, a results dict, two files
// (one inlined) and one file left out by the caps.
func withRichRecord(f *fakeEngine) *fakeEngine {
	started, finished := fakeTime(6), fakeTime(7)
	chart := fakeFileInfo("chart.png", "image/png")
	chart.Content = "aW1n"
	x := &engine.Execution{
		ID: idRich, Status: engine.StatusCompleted, StartedAt: &started, FinishedAt: &finished, DurationMs: 1000,
		PythonVersion: "3.12", CreatedAt: fakeTime(2),
		Outputs: []engine.Output{
			{Type: engine.OutputDisplay, Data: map[string]json.RawMessage{"text/plain": json.RawMessage(`"<table>"`), "text/html": json.RawMessage(`"<table></table>"`)}},
			{Type: engine.OutputResult, Data: map[string]json.RawMessage{"text/plain": json.RawMessage(`"42"`)}, Metadata: json.RawMessage(`{"text/plain":{}}`)},
		},
		OutputsTruncated: true,
		Results:          json.RawMessage(`{"accuracy":0.9}`),
		Files:            []engine.FileInfo{fakeFileInfo("out/report.csv", "text/csv"), chart, fakeFileInfo("name with ü.txt", "text/plain; charset=utf-8")},
		FilesOmitted:     1,
	}
	f.records[idRich] = x
	return f
}

// ListFiles and OpenFile serve the files of the fake's records, matching
// paths against the listing as the engine does.
func (f *fakeEngine) ListFiles(ctx context.Context, c engine.Caller, id string) ([]engine.FileInfo, error) {
	x, err := f.Get(ctx, c, id)
	if err != nil {
		return nil, err
	}
	return x.Files, nil
}

func (f *fakeEngine) OpenFile(ctx context.Context, c engine.Caller, id, unsafePath string) (io.ReadCloser, engine.FileInfo, error) {
	x, err := f.Get(ctx, c, id)
	if err != nil {
		return nil, engine.FileInfo{}, err
	}
	want := path.Clean(strings.TrimPrefix(unsafePath, "/"))
	for _, fi := range x.Files {
		if fi.Path == want {
			fi.Content = ""
			return io.NopCloser(bytes.NewReader(fakeFileData(fi.Path))), fi, nil
		}
	}
	return nil, engine.FileInfo{}, fmt.Errorf("%w: %s", engine.ErrFileNotFound, want)
}

func TestFiles(t *testing.T) {
	ts := newTestServer(t, withRichRecord(newFakeEngine()), nil)
	filesOf := "/api/v1/executions/" + idRich + "/files"

	t.Run("result carries outputs results and files", func(t *testing.T) {
		code, hdr, body := call(t, ts, http.MethodGet, "/api/v1/executions/"+idRich, "", nil, nil)
		checkGolden(t, goldenName(t), code, hdr, body)
	})

	jsonCases := []struct {
		name, path string
		wantCode   int
	}{
		{"list", filesOf, 200},
		{"list of an execution without files", "/api/v1/executions/" + idCompleted + "/files", 200},
		{"list unknown execution", "/api/v1/executions/exe_nope/files", 404},
		{"download unknown execution", "/api/v1/executions/exe_nope/files/out/report.csv", 404},
		{"download unknown file", filesOf + "/out/missing.csv", 404},
		{"download a directory of a listed file", filesOf + "/out", 404},
		{"download outside the workspace", filesOf + "/..%2F..%2Fetc%2Fpasswd", 404},
		{"download without a path", filesOf + "/", 400},
	}
	for _, tt := range jsonCases {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := call(t, ts, http.MethodGet, tt.path, "", nil, nil)
			if code != tt.wantCode {
				t.Errorf("status = %d, want %d: %s", code, tt.wantCode, body)
			}
			checkGolden(t, goldenName(t), code, hdr, body)
		})
	}

	downloads := []struct {
		name, path, file, mime, disposition string
	}{
		{"nested csv", "out/report.csv", "out/report.csv", "text/csv", `attachment; filename=report.csv`},
		{"image", "chart.png", "chart.png", "image/png", `attachment; filename=chart.png`},
		{"escaped non-ascii name", "name%20with%20%C3%BC.txt", "name with ü.txt", "text/plain; charset=utf-8", `attachment; filename*=utf-8''name%20with%20%C3%BC.txt`},
		{"dot segments are cleaned", "out/./report.csv", "out/report.csv", "text/csv", `attachment; filename=report.csv`},
	}
	for _, tt := range downloads {
		t.Run("download "+tt.name, func(t *testing.T) {
			code, hdr, body := call(t, ts, http.MethodGet, filesOf+"/"+tt.path, "", nil, nil)
			want := fakeFileData(tt.file)
			sum := sha256.Sum256(want)
			checks := []struct{ what, got, want string }{
				{"status", fmt.Sprint(code), "200"},
				{"body", string(body), string(want)},
				{"Content-Type", hdr.Get("Content-Type"), tt.mime},
				{"Content-Length", hdr.Get("Content-Length"), fmt.Sprint(len(want))},
				{"Content-Disposition", hdr.Get("Content-Disposition"), tt.disposition},
				{"ETag", hdr.Get("ETag"), `"` + hex.EncodeToString(sum[:]) + `"`},
				{"X-Content-Type-Options", hdr.Get("X-Content-Type-Options"), "nosniff"},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
				}
			}
		})
	}

	t.Run("If-None-Match with the ETag is 304", func(t *testing.T) {
		_, hdr, _ := call(t, ts, http.MethodGet, filesOf+"/chart.png", "", nil, nil)
		code, _, body := call(t, ts, http.MethodGet, filesOf+"/chart.png", "", nil, map[string]string{"If-None-Match": hdr.Get("ETag")})
		if code != http.StatusNotModified || len(body) != 0 {
			t.Fatalf("status %d with %d bytes, want 304 and no body", code, len(body))
		}
		code, _, _ = call(t, ts, http.MethodGet, filesOf+"/chart.png", "", nil, map[string]string{"If-None-Match": `"other"`})
		if code != 200 {
			t.Fatalf("another ETag: status %d, want 200", code)
		}
	})

	t.Run("documented", func(t *testing.T) {
		_, _, body := call(t, ts, http.MethodGet, "/openapi.json", "", nil, nil)
		var doc struct {
			Paths map[string]map[string]struct {
				Parameters []struct{ Name, In string } `json:"parameters"`
			} `json:"paths"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		dl, ok := doc.Paths["/api/v1/executions/{id}/files/{path}"]["get"]
		if !ok {
			t.Fatalf("download is not documented under a templatable path; paths: %v", keys(doc.Paths))
		}
		if len(dl.Parameters) < 2 || dl.Parameters[1].Name != "path" || dl.Parameters[1].In != "path" {
			t.Errorf("download parameters = %+v", dl.Parameters)
		}
		if _, ok := doc.Paths["/api/v1/executions/{id}/files"]["get"]; !ok {
			t.Error("the file list is not documented")
		}
		for p := range doc.Paths {
			if strings.Contains(p, "...") {
				t.Errorf("OpenAPI path %q carries the mux wildcard", p)
			}
		}
	})
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
