package api

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
)

// binaryData is every byte value: whatever is not text must survive.
func binaryData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestEvalRichRequests(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	tests := []struct {
		name     string
		body     string
		wantCode int
		check    func(t *testing.T, req engine.Request)
	}{
		{name: "base64 file arrives as raw bytes", wantCode: 200,
			body: `{"files":[{"name":"main.py","content":"print(1)"},{"name":"data.bin","content":"` + b64(binaryData(256)) + `","encoding":"base64"}]}`,
			check: func(t *testing.T, req engine.Request) {
				if len(req.Files) != 2 || !bytes.Equal(req.Files[1].Data, binaryData(256)) || string(req.Files[0].Data) != "print(1)" {
					t.Errorf("files = %+v", req.Files)
				}
			}},
		{name: "utf-8 encoding is text", wantCode: 200,
			body: `{"files":[{"name":"main.py","content":"print('é')","encoding":"utf-8"}]}`,
			check: func(t *testing.T, req engine.Request) {
				if string(req.Files[0].Data) != "print('é')" {
					t.Errorf("data = %q", req.Files[0].Data)
				}
			}},
		{name: "rich options reach the engine", wantCode: 200,
			body: `{"files":[{"name":"main.py","content":"df"},{"name":"data.csv","content":"a\n1\n"}],"dataframes":{"df":"data.csv"},"collect":["out/*.csv"],"figure_format":"svg","max_rows":7}`,
			check: func(t *testing.T, req engine.Request) {
				if req.DataFrames["df"] != "data.csv" || !slices.Equal(req.Collect, []string{"out/*.csv"}) || req.FigureFormat != "svg" || req.MaxRows != 7 {
					t.Errorf("request = %+v", req)
				}
			}},
		{name: "base64 data does not count as code", wantCode: 200,
			body: `{"files":[{"name":"main.py","content":"1"},{"name":"big.bin","content":"` + b64(binaryData(150<<10)) + `","encoding":"base64"}]}`},
		{name: "unknown encoding", wantCode: 400, body: `{"files":[{"name":"main.py","content":"1","encoding":"latin-1"}]}`},
		{name: "invalid base64", wantCode: 400, body: `{"files":[{"name":"main.py","content":"1"},{"name":"d.bin","content":"not base64!","encoding":"base64"}]}`},
		{name: "max_rows of the wrong type", wantCode: 400, body: `{"code":"1","max_rows":"ten"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := newFakeEngine()
			ts := newTestServer(t, eng, func(c *config.Config) { c.MaxArchiveFileBytes = 200 << 10; c.MaxArchiveBytes = 400 << 10 })
			code, hdr, resp := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json", []byte(tt.body), nil)
			if code != tt.wantCode {
				t.Fatalf("status = %d, want %d: %.300s", code, tt.wantCode, resp)
			}
			req, accepted := eng.lastRequest()
			if tt.wantCode != 200 {
				checkGolden(t, goldenName(t), code, hdr, resp)
				if accepted {
					t.Errorf("a rejected request reached the engine: %+v", req)
				}
				return
			}
			if tt.check != nil {
				tt.check(t, req)
			}
		})
	}

	t.Run("binary file over the per-file cap", func(t *testing.T) {
		eng := newFakeEngine()
		ts := newTestServer(t, eng, nil) // 1000 bytes per file, 2000 in total
		body := `{"files":[{"name":"main.py","content":"1"},{"name":"d.bin","content":"` + b64(binaryData(1001)) + `","encoding":"base64"}]}`
		code, hdr, resp := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json", []byte(body), nil)
		checkGolden(t, goldenName(t), code, hdr, resp)
	})
	t.Run("binary files over the total cap", func(t *testing.T) {
		eng := newFakeEngine()
		ts := newTestServer(t, eng, nil)
		one := `{"name":"%s","content":"` + b64(binaryData(900)) + `","encoding":"base64"}`
		body := `{"files":[{"name":"main.py","content":"1"},` + strings.Join([]string{
			strings.Replace(one, "%s", "a.bin", 1), strings.Replace(one, "%s", "b.bin", 1), strings.Replace(one, "%s", "c.bin", 1)}, ",") + `]}`
		code, hdr, resp := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json", []byte(body), nil)
		checkGolden(t, goldenName(t), code, hdr, resp)
	})
}

func TestExecRichMetadata(t *testing.T) {
	eng := newFakeEngine()
	ts := newTestServer(t, eng, nil)
	tarData := makeTar(t, tar.FormatPAX, tarEntry{Name: "main.py", Body: "df"}, tarEntry{Name: "data.csv", Body: "a\n1\n"})
	ct, body := multipartBody(t, tarData, `{"dataframes":{"df":"data.csv"},"collect":["*.png","out/**"],"figure_format":"png","max_rows":3}`, metaJSONPart)
	code, _, resp := call(t, ts, http.MethodPost, "/api/v1/exec/sync", ct, body, nil)
	if code != 200 {
		t.Fatalf("status %d: %s", code, resp)
	}
	req, _ := eng.lastRequest()
	if req.DataFrames["df"] != "data.csv" || !slices.Equal(req.Collect, []string{"*.png", "out/**"}) || req.FigureFormat != "png" || req.MaxRows != 3 {
		t.Errorf("request = %+v", req)
	}
}

func TestDisplayEvents(t *testing.T) {
	eng := newFakeEngine()
	display := `{"type":"display","data":{"text/plain":"<Figure>","image/png":"iVBO"}}`
	eng.events[idRich] = []engine.Event{
		{Seq: 1, Type: engine.EventStatus, Data: "running", Time: fakeTime(1)},
		{Seq: 2, Type: engine.EventDisplay, Data: display, Time: fakeTime(2)},
		{Seq: 3, Type: engine.EventStatus, Data: "completed", Time: fakeTime(3)},
	}
	ts := newTestServer(t, eng, nil)
	for _, tt := range []struct{ name, accept, want string }{
		{"sse", "", "id: 2\nevent: display\ndata: {\"seq\":2,\"type\":\"display\",\"data\":" + jsonString(t, display)},
		{"ndjson", ndjsonType, "{\"seq\":2,\"type\":\"display\",\"data\":" + jsonString(t, display)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.accept != "" {
				hdr["Accept"] = tt.accept
			}
			code, _, body := call(t, ts, http.MethodGet, "/api/v1/executions/"+idRich+"/events", "", nil, hdr)
			if code != 200 || !strings.Contains(string(body), tt.want) {
				t.Fatalf("status %d, stream:\n%s\nwant it to contain:\n%s", code, body, tt.want)
			}
		})
	}
}

// jsonString is s as a JSON string literal.
func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
