package api

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// testKey is a valid API key for servers started with keys.
const testKey = "test-key-0123456789abcdef"

// newTestServer starts a real HTTP server over eng with small limits so
// that caps are cheap to hit.
func newTestServer(t *testing.T, eng Engine, mutate func(c *config.Config)) *httptest.Server {
	t.Helper()
	c := config.Default()
	c.MaxBodyMB = 1
	c.MaxArchiveFiles = 5
	c.MaxArchiveFileBytes = 1000
	c.MaxArchiveBytes = 2000
	if mutate != nil {
		mutate(&c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	s, err := New(eng, Options{Config: c, Version: "test", Isolation: "jail", Heartbeat: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// tarEntry is one entry of a test archive; Type defaults to a regular file.
type tarEntry struct {
	Name, Body, Link string
	Type             byte
	Mode             int64
}

// makeTar builds an archive in the given format with archive/tar.
func makeTar(t *testing.T, format tar.Format, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.Mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.Name, Typeflag: typ, Linkname: e.Link, Mode: mode, Format: format, ModTime: time.Unix(1700000000, 0)}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("tar header %q: %v", e.Name, err)
		}
		if _, err := io.WriteString(tw, e.Body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// How the metadata part is sent.
const (
	metaFormField = iota // plain form field, as curl -F metadata=... does
	metaJSONPart         // Content-Type: application/json part, no file name
	metaNone
)

// multipartBody builds an exec request body with a "tar" part (when tarData
// is not nil) and a "metadata" part.
func multipartBody(t *testing.T, tarData []byte, metadata string, how int) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	switch how {
	case metaFormField:
		if err := mw.WriteField("metadata", metadata); err != nil {
			t.Fatal(err)
		}
	case metaJSONPart:
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="metadata"`)
		h.Set("Content-Type", "application/json")
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, metadata)
	}
	if tarData != nil {
		w, err := mw.CreateFormFile("tar", "code.tar")
		if err != nil {
			t.Fatal(err)
		}
		w.Write(tarData)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), buf.Bytes()
}

// call sends a request and returns the status, headers and body.
func call(t *testing.T, ts *httptest.Server, method, path, contentType string, body []byte, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, data
}

// goldenResponse is how responses are stored under testdata/.
type goldenResponse struct {
	Code int             `json:"code"`
	Body json.RawMessage `json:"body"`
}

// checkGolden compares a JSON response with testdata/<name>.json, or
// rewrites the file with -update.
func checkGolden(t *testing.T, name string, code int, header http.Header, body []byte) {
	t.Helper()
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if !json.Valid(body) {
		t.Fatalf("body is not JSON: %s", body)
	}
	got, err := json.MarshalIndent(goldenResponse{Code: code, Body: body}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	compareGolden(t, name+".json", append(got, '\n'))
}

// compareGolden compares got with testdata/<file>, or rewrites it with -update.
func compareGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("response differs from %s\n got: %s\nwant: %s", path, got, want)
	}
}

// goldenName turns the test's name into a file name:
// "TestExec/symlink in PAX" → "exec__symlink_in_pax".
func goldenName(t *testing.T) string {
	name := strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))
	name = strings.ReplaceAll(name, "/", "__")
	var b strings.Builder
	for _, r := range name {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func mustRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	return r
}
