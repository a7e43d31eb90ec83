package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// bundle builds an Output from MIME type → JSON value pairs.
func bundle(typ string, data map[string]any) client.Output {
	o := client.Output{Type: typ, Data: map[string]json.RawMessage{}}
	for k, v := range data {
		raw, _ := json.Marshal(v)
		o.Data[k] = raw
	}
	return o
}

func TestRunPythonRichResults(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfigure")
	figure := bundle("display", map[string]any{"text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": base64.StdEncoding.EncodeToString(png)})
	frame := bundle("display", map[string]any{"text/plain": "  city  temp\n0 Oslo     3", "text/html": "<table><tr><td>Oslo</td></tr></table>",
		"application/json": map[string]any{"columns": []string{"city", "temp"}, "total_rows": 1}})
	svg := bundle("display", map[string]any{"text/plain": "<Figure>", "image/svg+xml": "<svg/>"})
	huge := bundle("display", map[string]any{"text/plain": strings.Repeat("x", maxOutputText+10)})

	f := newFake()
	f.final = &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusCompleted,
		Outputs: []client.Output{figure, frame, svg, huge}, Results: json.RawMessage(`{"accuracy":0.93}`),
		Files: []client.FileInfo{{Path: "out/report.csv", Size: 25, MIME: "text/csv", SHA256: "abc"}}, FilesOmitted: 2}
	cs, _ := connect(t, f, Options{})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "..."}})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("plots are image content", func(t *testing.T) {
		var images []*mcp.ImageContent
		for _, c := range res.Content {
			if img, ok := c.(*mcp.ImageContent); ok {
				images = append(images, img)
			}
		}
		if len(images) != 1 || images[0].MIMEType != "image/png" || !bytes.Equal(images[0].Data, png) {
			t.Fatalf("images %+v, want the one PNG", images)
		}
	})

	t.Run("the text describes results, outputs and files", func(t *testing.T) {
		for _, w := range []string{"--- results ---\n{\"accuracy\":0.93}\n", "--- output 1: image/png, image 1 below ---\n",
			"--- output 2 (application/json, text/html, text/plain) ---\n  city  temp\n0 Oslo     3\n",
			"--- output 3 (image/svg+xml, text/plain) ---\n<Figure>\n",
			"--- files (read one with read_file, execution_id exe_fake) ---\nout/report.csv (25 bytes, text/csv)\n",
			"[2 more files not collected"} {
			if !strings.Contains(text(res), w) {
				t.Errorf("text %q does not contain %q", text(res), w)
			}
		}
	})

	t.Run("structured content has the summaries", func(t *testing.T) {
		out := decodeStructured(t, res)
		if !reflect.DeepEqual(out.Results, map[string]any{"accuracy": 0.93}) {
			t.Errorf("results %#v", out.Results)
		}
		if len(out.Outputs) != 4 {
			t.Fatalf("outputs %+v", out.Outputs)
		}
		if o := out.Outputs[0]; o.Image != 1 || o.Text != "<Figure size 640x480 with 1 Axes>" || !reflect.DeepEqual(o.MIMETypes, []string{"image/png", "text/plain"}) {
			t.Errorf("figure %+v", o)
		}
		if o := out.Outputs[1]; o.HTML != "<table><tr><td>Oslo</td></tr></table>" || o.Image != 0 ||
			!reflect.DeepEqual(o.JSON, map[string]any{"columns": []any{"city", "temp"}, "total_rows": 1.0}) {
			t.Errorf("data frame %+v", o)
		}
		if o := out.Outputs[3]; !o.Truncated || len(o.Text) != maxOutputText {
			t.Errorf("huge output: truncated %v, %d bytes", o.Truncated, len(o.Text))
		}
		want := []FileEntry{{Path: "out/report.csv", Size: 25, MIME: "text/csv", SHA256: "abc"}}
		if !reflect.DeepEqual(out.Files, want) || out.FilesOmitted != 2 {
			t.Errorf("files %+v omitted %d", out.Files, out.FilesOmitted)
		}
	})
}

func TestRunPythonImageCap(t *testing.T) {
	f := newFake()
	fig := bundle("display", map[string]any{"image/png": base64.StdEncoding.EncodeToString([]byte("png"))})
	f.final = &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusCompleted, Outputs: make([]client.Output, maxImages+2)}
	for i := range f.final.Outputs {
		f.final.Outputs[i] = fig
	}
	cs, _ := connect(t, f, Options{})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "..."}})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Content) - 1; got != maxImages {
		t.Errorf("%d images, want %d", got, maxImages)
	}
	if !strings.Contains(text(res), "left out (at most 8 images per result)") {
		t.Errorf("text %q does not say images were left out", text(res))
	}
}

func TestRunPythonRequirements(t *testing.T) {
	tests := []struct {
		name      string
		reqs      []string
		want      string
		wantError string
	}{
		{"one per line", []string{"pandas", " requests==2.32.3 "}, "pandas\nrequests==2.32.3\n", ""},
		{"none", nil, "", ""},
		{"an option is refused", []string{"--index-url=http://evil"}, "", "is an option, not a package"},
		{"a line break is refused", []string{"pandas\n--pre"}, "", "holds a line break"},
		{"an empty entry is refused", []string{" "}, "", "requirements[0] is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.final = &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusCompleted}
			cs, _ := connect(t, f, Options{})
			args := map[string]any{"code": "import pandas"}
			if tt.reqs != nil {
				args["requirements"] = tt.reqs
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantError != "" {
				if !res.IsError || !strings.Contains(text(res), tt.wantError) {
					t.Fatalf("isError %v, text %q, want %q", res.IsError, text(res), tt.wantError)
				}
				return
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.meta.RequirementsTxt != tt.want {
				t.Errorf("requirements_txt %q, want %q", f.meta.RequirementsTxt, tt.want)
			}
		})
	}
}

func TestRunPythonProgressOfInstallAndDisplay(t *testing.T) {
	f := newFake()
	display, _ := json.Marshal(bundle("display", map[string]any{"text/plain": "<Figure>", "image/png": "AAAA"}))
	f.events = events("status", "pending", "install", "Resolved 1 package", "install", "Installed tinyreq-1.2",
		"status", "running", "display", string(display), "display", "not json", "status", "completed")
	f.final = &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusCompleted}
	cs, progress := connect(t, f, Options{})
	params := &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "...", "requirements": []string{"tinyreq"}}}
	params.SetProgressToken("tok")
	if _, err := cs.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	want := []string{"status: pending", "install: Resolved 1 package", "install: Installed tinyreq-1.2", "status: running",
		"display: image/png, text/plain", "status: completed"}
	var got []string
	timeout := time.After(5 * time.Second)
	for len(got) < len(want) {
		select {
		case m := <-progress:
			got = append(got, m)
		case <-timeout:
			t.Fatalf("progress %q, want %q", got, want)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("progress %q, want %q", got, want)
	}
}
