package mcpserver

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// artifactFake serves a few files of every kind read_file tells apart.
func artifactFake() *fakeBackend {
	f := newFake()
	png := []byte("\x89PNG\r\n\x1a\nfake image bytes")
	content := map[string][]byte{
		"out/report.csv": []byte("city,temp\nOslo,3\nRome,18\n"),
		"chart.png":      png,
		"model.bin":      {0, 1, 2, 3, 0xff},
		"notes.log":      []byte("plain text under an unknown type\n"),
		"big.png":        bytes.Repeat([]byte{1}, maxImageBytes+1),
		"long.txt":       []byte(strings.Repeat("ab", 50) + "é" + "tail"),
	}
	mimes := map[string]string{"out/report.csv": "text/csv; charset=utf-8", "chart.png": "image/png", "model.bin": "application/octet-stream",
		"notes.log": "application/octet-stream", "big.png": "image/png", "long.txt": "text/plain"}
	f.content = content
	for _, p := range []string{"out/report.csv", "chart.png", "model.bin", "notes.log", "big.png", "long.txt"} {
		f.listing = append(f.listing, client.FileInfo{Path: p, Size: int64(len(content[p])), MIME: mimes[p], SHA256: "sha-" + p})
	}
	return f
}

func TestListFiles(t *testing.T) {
	tests := []struct {
		name      string
		backend   func() *fakeBackend
		wantError bool
		wantText  []string
		wantFiles int
	}{
		{"every file with its size and type", artifactFake, false,
			[]string{"6 files of execution exe_fake:\n", "out/report.csv (25 bytes, text/csv; charset=utf-8)\n", "chart.png (24 bytes, image/png)\n"}, 6},
		{"no files says so", newFake, false, []string{"Execution exe_fake produced no files."}, 0},
		{"an unknown execution is an error result", func() *fakeBackend {
			f := newFake()
			f.listErr = &client.APIError{StatusCode: 404, Message: "execution not found"}
			return f
		}, true, []string{"listing the files of exe_fake: execution not found (HTTP 404)"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, _ := connect(t, tt.backend(), Options{})
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_files", Arguments: map[string]any{"execution_id": fakeID}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tt.wantError {
				t.Errorf("isError %v, text %q", res.IsError, text(res))
			}
			for _, w := range tt.wantText {
				if !strings.Contains(text(res), w) {
					t.Errorf("text %q does not contain %q", text(res), w)
				}
			}
			if !tt.wantError {
				var out ListFilesOutput
				if raw, err := jsonRoundTrip(res.StructuredContent, &out); err != nil {
					t.Fatalf("%s: %v", raw, err)
				}
				if out.ExecutionID != fakeID || len(out.Files) != tt.wantFiles || out.Files == nil {
					t.Errorf("structured content %+v", out)
				}
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	tests := []struct {
		name      string
		args      map[string]any
		wantError bool
		wantText  []string // in the text blocks
		wantImage string   // MIME type of an image block
		wantBlob  []byte   // bytes of an embedded resource
		want      ReadFileOutput
	}{
		{
			name:     "a text file comes back as text",
			args:     map[string]any{"path": "out/report.csv"},
			wantText: []string{"city,temp\nOslo,3\nRome,18\n"},
			want:     ReadFileOutput{Path: "out/report.csv", Size: 25, MIME: "text/csv; charset=utf-8", Returned: "text", Bytes: 25},
		},
		{
			name:      "an image comes back as image content",
			args:      map[string]any{"path": "chart.png"},
			wantText:  []string{"chart.png (image/png, 24 bytes)"},
			wantImage: "image/png",
			want:      ReadFileOutput{Path: "chart.png", Size: 24, MIME: "image/png", Returned: "image", Bytes: 24},
		},
		{
			name:     "other binary comes back as a blob resource",
			args:     map[string]any{"path": "model.bin"},
			wantText: []string{"model.bin is binary (application/octet-stream, 5 bytes)"},
			wantBlob: []byte{0, 1, 2, 3, 0xff},
			want:     ReadFileOutput{Path: "model.bin", Size: 5, MIME: "application/octet-stream", Returned: "resource", Bytes: 5},
		},
		{
			name:     "binary of an unknown type whose bytes are text comes back as text",
			args:     map[string]any{"path": "notes.log"},
			wantText: []string{"plain text under an unknown type\n"},
			want:     ReadFileOutput{Path: "notes.log", Size: 33, MIME: "application/octet-stream", Returned: "text", Bytes: 33},
		},
		{
			name:     "an image over the cap is described, not sent",
			args:     map[string]any{"path": "big.png"},
			wantText: []string{"more than read_file returns", "/api/v1/executions/exe_fake/files/big.png"},
			want:     ReadFileOutput{Path: "big.png", Size: maxImageBytes + 1, MIME: "image/png", Returned: "none"},
		},
		{
			name:     "a long text is cut on a character boundary and says where to go on",
			args:     map[string]any{"path": "long.txt", "max_bytes": 101},
			wantText: []string{strings.Repeat("ab", 50) + "\n[long.txt: bytes 0-100 of 106 shown; call read_file with offset 100 to read on]"},
			want:     ReadFileOutput{Path: "long.txt", Size: 106, MIME: "text/plain", Returned: "text", Bytes: 100, Truncated: true},
		},
		{
			name:     "offset reads on",
			args:     map[string]any{"path": "long.txt", "offset": 100},
			wantText: []string{"étail"},
			want:     ReadFileOutput{Path: "long.txt", Size: 106, MIME: "text/plain", Returned: "text", Offset: 100, Bytes: 6},
		},
		{
			name:      "an unknown path is an error naming the files there are",
			args:      map[string]any{"path": "missing.txt"},
			wantError: true,
			wantText:  []string{`execution exe_fake has no file "missing.txt"; its files are: out/report.csv, chart.png, model.bin`},
		},
		{
			name:      "max_bytes over the cap is refused",
			args:      map[string]any{"path": "long.txt", "max_bytes": maxReadBytes + 1},
			wantError: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, _ := connect(t, artifactFake(), Options{})
			tt.args["execution_id"] = fakeID
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tt.wantError {
				t.Fatalf("isError %v, text %q", res.IsError, text(res))
			}
			for _, w := range tt.wantText {
				if !strings.Contains(text(res), w) {
					t.Errorf("text %q does not contain %q", text(res), w)
				}
			}
			var image, blob bool
			for _, c := range res.Content {
				switch c := c.(type) {
				case *mcp.ImageContent:
					image = c.MIMEType == tt.wantImage && len(c.Data) == int(tt.want.Size)
				case *mcp.EmbeddedResource:
					blob = bytes.Equal(c.Resource.Blob, tt.wantBlob) && c.Resource.URI == "pyexec://executions/exe_fake/files/"+tt.want.Path
				}
			}
			if image != (tt.wantImage != "") || blob != (tt.wantBlob != nil) {
				t.Errorf("image content %v (want %q), blob %v (want %v); content %+v", image, tt.wantImage, blob, tt.wantBlob != nil, res.Content)
			}
			if tt.wantError {
				return
			}
			var got ReadFileOutput
			if raw, err := jsonRoundTrip(res.StructuredContent, &got); err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
			tt.want.ExecutionID = fakeID
			if got != tt.want {
				t.Errorf("structured content\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestTrimToRune(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"ascii", "abc", "abc"},
		{"whole rune at the end", "aé", "aé"},
		{"cut rune at the end", "a\xc3", "a"},
		{"cut three-byte rune", "a\xe2\x82", "a"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(trimToRune([]byte(tt.in))); got != tt.want {
				t.Errorf("trimToRune(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
