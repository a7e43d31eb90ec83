package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// fileServer serves two files of exe_1 the way pyexec does, and records
// the eval bodies it receives.
func fileServer(t *testing.T, evals chan<- []byte) *httptest.Server {
	t.Helper()
	files := map[string][]byte{"out/report.csv": []byte("a,b\n1,2\n"), "name with ü.bin": {0, 1, 2, 255}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/executions/exe_1/files", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"execution_id":"exe_1","files":[{"path":"out/report.csv","size":8,"sha256":"ab","mime":"text/csv"}]}`)
	})
	mux.HandleFunc("GET /api/v1/executions/{id}/files/{path...}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "exe_1" {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"execution not found"}`)
			return
		}
		data, ok := files[r.PathValue("path")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"file not found"}`)
			return
		}
		w.Write(data)
	})
	mux.HandleFunc("POST /api/v1/eval", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		evals <- b
		io.WriteString(w, `{"execution_id":"exe_1","status":"completed","exit_code":0,
			"outputs":[{"type":"display","data":{"text/plain":"<Figure>","image/png":"iVBORw=="}}],
			"results":{"n":1},"files":[{"path":"out/report.csv","size":8,"sha256":"ab","mime":"text/csv"}],"files_omitted":2}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestDownloadFile(t *testing.T) {
	srv := fileServer(t, nil)
	c := New(srv.URL)
	tests := []struct {
		name, id, path string
		want           []byte
		wantErr        string // the APIError message; "" for success
	}{
		{name: "nested path", id: "exe_1", path: "out/report.csv", want: []byte("a,b\n1,2\n")},
		{name: "escaped name", id: "exe_1", path: "name with ü.bin", want: []byte{0, 1, 2, 255}},
		{name: "unknown file", id: "exe_1", path: "nope.txt", wantErr: "file not found"},
		{name: "unknown execution", id: "exe_2", path: "out/report.csv", wantErr: "execution not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := c.DownloadFile(context.Background(), tt.id, tt.path)
			if tt.wantErr != "" {
				var apiErr *APIError
				if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Message != tt.wantErr {
					t.Fatalf("error = %v, want a 404 APIError %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("content %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

func TestListFiles(t *testing.T) {
	c := New(fileServer(t, nil).URL)
	files, err := c.ListFiles(context.Background(), "exe_1")
	if err != nil || len(files) != 1 || files[0].Path != "out/report.csv" || files[0].Size != 8 || files[0].MIME != "text/csv" {
		t.Fatalf("files = %+v (%v)", files, err)
	}
}

func TestEvalRich(t *testing.T) {
	evals := make(chan []byte, 1)
	c := New(fileServer(t, evals).URL)
	data := []byte{0, 0xff, 0xfe, 'x'}
	res, err := c.Eval(context.Background(), &SimpleExecRequest{
		Files:       []CodeFile{{Name: "main.py", Content: "print(1)"}, BinaryFile("data.bin", data)},
		RichOptions: RichOptions{DataFrames: map[string]string{"df": "data.csv"}, Collect: []string{"out/*"}, FigureFormat: "svg", MaxRows: 5},
	})
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Files []struct {
			Name, Content, Encoding string
		} `json:"files"`
		DataFrames   map[string]string `json:"dataframes"`
		Collect      []string          `json:"collect"`
		FigureFormat string            `json:"figure_format"`
		MaxRows      int               `json:"max_rows"`
	}
	if err := json.Unmarshal(<-evals, &sent); err != nil {
		t.Fatal(err)
	}
	decoded, _ := base64.StdEncoding.DecodeString(sent.Files[1].Content)
	if sent.Files[0].Encoding != "" || sent.Files[1].Encoding != "base64" || !bytes.Equal(decoded, data) {
		t.Errorf("files sent = %+v", sent.Files)
	}
	if sent.DataFrames["df"] != "data.csv" || len(sent.Collect) != 1 || sent.FigureFormat != "svg" || sent.MaxRows != 5 {
		t.Errorf("options sent = %+v", sent)
	}
	if len(res.Outputs) != 1 || string(res.Results) != `{"n":1}` || len(res.Files) != 1 || res.FilesOmitted != 2 {
		t.Fatalf("result = %+v", res)
	}
	mime, img, ok := res.Outputs[0].Image()
	if !ok || mime != "image/png" || !bytes.HasPrefix(img, []byte("\x89PNG")) {
		t.Errorf("Image() = %s %q %v", mime, img, ok)
	}
	if text, ok := res.Outputs[0].Text("text/plain"); !ok || text != "<Figure>" {
		t.Errorf("Text(text/plain) = %q %v", text, ok)
	}
}

func TestOutputImage(t *testing.T) {
	tests := []struct {
		name     string
		data     string
		wantMIME string
		want     string
	}{
		{"png wins", `{"image/svg+xml":"<svg/>","image/png":"AQI="}`, "image/png", "\x01\x02"},
		{"jpeg", `{"image/jpeg":"/9g="}`, "image/jpeg", "\xff\xd8"},
		{"svg is text", `{"text/plain":"x","image/svg+xml":"<svg/>"}`, "image/svg+xml", "<svg/>"},
		{"no image", `{"text/plain":"x"}`, "", ""},
		{"broken base64 falls through", `{"image/png":"%%%","image/svg+xml":"<svg/>"}`, "image/svg+xml", "<svg/>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o Output
			if err := json.Unmarshal([]byte(`{"type":"display","data":`+tt.data+`}`), &o); err != nil {
				t.Fatal(err)
			}
			mime, data, ok := o.Image()
			if mime != tt.wantMIME || string(data) != tt.want || ok != (tt.wantMIME != "") {
				t.Fatalf("Image() = %q %q %v", mime, data, ok)
			}
		})
	}
}

func TestEventOutput(t *testing.T) {
	ev := Event{Seq: 3, Type: EventDisplay, Data: `{"type":"display","data":{"text/plain":"'hi'"}}`}
	o, err := ev.Output()
	if text, _ := o.Text("text/plain"); err != nil || text != "'hi'" {
		t.Fatalf("Output() = %+v, %v", o, err)
	}
	if _, err := (Event{Seq: 1, Type: EventStdout, Data: "x"}).Output(); err == nil {
		t.Error("a stdout event decoded as an output")
	}
}
