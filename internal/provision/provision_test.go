package provision

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// fakeTool builds a wheel holding a shell script that prints its version,
// and the Tool that pins it.
func fakeTool(t *testing.T, version string) (Tool, []byte) {
	t.Helper()
	tool := Tool{Name: "faketool", Version: version}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range map[string]string{
		tool.member(): "#!/bin/sh\necho faketool " + version + "\n",
		"faketool-" + version + ".dist-info/RECORD": "",
	} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	file := "faketool-" + version + "-py3-none-any.whl"
	tool.Wheels = map[string]Wheel{runtime.GOARCH: {File: file, SHA256: hex.EncodeToString(sum[:])}}
	return tool, buf.Bytes()
}

// index serves a PEP 503 page for faketool linking to file (relative, with
// a digest fragment as real indexes do) and the file's bytes; it counts
// the downloads.
func index(t *testing.T, file string, data []byte, downloads *int) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/faketool/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "<html><body><a href=\"../../files/%s#sha256=0\">%s</a><br/>\n<a href='../../files/other.whl'>other</a></body></html>", file, file)
	})
	mux.HandleFunc("/files/"+file, func(w http.ResponseWriter, _ *http.Request) {
		*downloads++
		w.Write(data)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestFetchVerifiesAndKeepsTheTool(t *testing.T) {
	tool, wheel := fakeTool(t, "1.2.3")
	downloads := 0
	srv := index(t, tool.Wheels[runtime.GOARCH].File, wheel, &downloads)
	dir := t.TempDir()
	p := New(Config{Dir: dir, IndexURLs: []string{"http://127.0.0.1:1/nothing", srv.URL + "/simple"}})
	defer p.Close()
	path, err := p.Fetch(context.Background(), tool)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "faketool-1.2.3", "faketool"); path != want {
		t.Errorf("path = %s, want %s", path, want)
	}
	if out, err := exec.Command(path).Output(); err != nil || string(out) != "faketool 1.2.3\n" {
		t.Errorf("running the fetched tool: %q, %v", out, err)
	}
	// A second fetch, even by a new provisioner with the index gone,
	// finds it on disk.
	srv.Close()
	again, err := New(Config{Dir: dir}).Fetch(context.Background(), tool)
	if err != nil || again != path || downloads != 1 {
		t.Errorf("second fetch: %s, %v after %d downloads", again, err, downloads)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the tools directory holds %d entries, want only the tool's: %v", len(entries), entries)
	}
}

func TestFetchRefusesAWheelWithAnotherDigest(t *testing.T) {
	tool, wheel := fakeTool(t, "1.2.3")
	tampered := append(bytes.Clone(wheel), 0)
	downloads := 0
	srv := index(t, tool.Wheels[runtime.GOARCH].File, tampered, &downloads)
	dir := t.TempDir()
	p := New(Config{Dir: dir, IndexURLs: []string{srv.URL + "/simple/"}})
	defer p.Close()
	_, err := p.Fetch(context.Background(), tool)
	if !errors.Is(err, ErrDigest) {
		t.Fatalf("err = %v, want ErrDigest", err)
	}
	if _, ok := p.Installed(tool); ok {
		t.Error("the tampered tool was installed")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("the tools directory kept %v", entries)
	}
}

func TestFetchFromAFileIndex(t *testing.T) {
	tool, wheel := fakeTool(t, "2.0")
	idx := t.TempDir()
	file := tool.Wheels[runtime.GOARCH].File
	if err := os.MkdirAll(filepath.Join(idx, "faketool"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(idx, "faketool", file), wheel, 0o644); err != nil {
		t.Fatal(err)
	}
	p := New(Config{Dir: t.TempDir(), IndexURLs: []string{"file://" + idx}})
	defer p.Close()
	j := p.Start(tool)
	path, err := j.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, gerr, done := j.Result(); !done || got != path || gerr != nil {
		t.Errorf("Result = %s, %v, %v", got, gerr, done)
	}
}

func TestFetchNamesWhatIsMissing(t *testing.T) {
	tool, _ := fakeTool(t, "1.0")
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	p := New(Config{Dir: t.TempDir(), IndexURLs: []string{srv.URL + "/simple"}})
	defer p.Close()
	if _, err := p.Fetch(context.Background(), tool); !errors.Is(err, ErrNotOnIndex) {
		t.Errorf("err = %v, want ErrNotOnIndex", err)
	}
	other := tool
	other.Wheels = map[string]Wheel{"no-such-arch": {}}
	if _, err := p.Fetch(context.Background(), other); !errors.Is(err, ErrUnsupported) {
		t.Errorf("err = %v, want ErrUnsupported", err)
	}
}
