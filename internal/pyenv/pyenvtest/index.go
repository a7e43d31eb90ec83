package pyenvtest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Wheel describes a tiny pure-Python distribution.
type Wheel struct {
	Name     string            // distribution name, e.g. "PyYAML"
	Version  string            // e.g. "6.0"
	Files    map[string]string // path inside the wheel → content, e.g. "yaml/__init__.py"
	Requires []string          // Requires-Dist lines
}

// Filename is the wheel's file name.
func (w Wheel) Filename() string {
	return fmt.Sprintf("%s-%s-py3-none-any.whl", distPart(w.Name), w.Version)
}

func distPart(name string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(name)
}

// Bytes builds the wheel: the files, METADATA, WHEEL and a RECORD with
// each file's hash.
func (w Wheel) Bytes() ([]byte, error) {
	info := distPart(w.Name) + "-" + w.Version + ".dist-info/"
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", w.Name, w.Version)
	for _, r := range w.Requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files := map[string]string{}
	for k, v := range w.Files {
		files[k] = v
	}
	files[info+"METADATA"] = meta
	files[info+"WHEEL"] = "Wheel-Version: 1.0\nGenerator: pyexec-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, n := range names {
		f, err := zw.Create(n)
		if err != nil {
			return nil, err
		}
		if _, err := f.Write([]byte(files[n])); err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(files[n]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", n, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[n]))
	}
	record.WriteString(info + "RECORD,,\n")
	f, err := zw.Create(info + "RECORD")
	if err != nil {
		return nil, err
	}
	if _, err := f.Write([]byte(record.String())); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Index is a PEP 503 simple index on loopback serving wheels.
type Index struct {
	// URL is the index's /simple/ URL, for EnvConfig.IndexURL.
	URL string

	mu       sync.Mutex
	projects map[string][]string // normalised name → file names
	files    map[string][]byte
	fetches  map[string]int // file name → downloads
	pages    map[string]int // normalised project → project page requests
}

// NewIndex serves wheels until the test ends.
func NewIndex(t testing.TB, wheels ...Wheel) *Index {
	t.Helper()
	ix := &Index{projects: map[string][]string{}, files: map[string][]byte{}, fetches: map[string]int{}, pages: map[string]int{}}
	for _, w := range wheels {
		b, err := w.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		n := normalize(w.Name)
		ix.projects[n] = append(ix.projects[n], w.Filename())
		ix.files[w.Filename()] = b
	}
	srv := httptest.NewServer(http.HandlerFunc(ix.serve))
	t.Cleanup(srv.Close)
	ix.URL = srv.URL + "/simple/"
	return ix
}

// Pages returns how often the project page of name was requested: once
// per resolution that needed it.
func (ix *Index) Pages(name string) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.pages[normalize(name)]
}

// Fetches returns how often the wheel file was requested (an installer may
// make several range requests for one download).
func (ix *Index) Fetches(file string) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.fetches[file]
}

func (ix *Index) serve(w http.ResponseWriter, r *http.Request) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	switch {
	case r.URL.Path == "/simple/":
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!DOCTYPE html><html><body>\n")
		for p := range ix.projects {
			fmt.Fprintf(w, "<a href=\"/simple/%s/\">%s</a>\n", p, p)
		}
		fmt.Fprint(w, "</body></html>\n")
	case strings.HasPrefix(r.URL.Path, "/simple/"):
		name := normalize(strings.Trim(strings.TrimPrefix(r.URL.Path, "/simple/"), "/"))
		ix.pages[name]++
		files, ok := ix.projects[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!DOCTYPE html><html><body>\n")
		for _, f := range files {
			sum := sha256.Sum256(ix.files[f])
			fmt.Fprintf(w, "<a href=\"/files/%s#sha256=%s\">%s</a>\n", html.EscapeString(f), hex.EncodeToString(sum[:]), html.EscapeString(f))
		}
		fmt.Fprint(w, "</body></html>\n")
	case strings.HasPrefix(r.URL.Path, "/files/"):
		f := strings.TrimPrefix(r.URL.Path, "/files/")
		b, ok := ix.files[f]
		if !ok {
			http.NotFound(w, r)
			return
		}
		ix.fetches[f]++
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

func normalize(name string) string {
	var b strings.Builder
	sep := false
	for _, r := range strings.ToLower(name) {
		if r == '-' || r == '_' || r == '.' {
			sep = true
			continue
		}
		if sep && b.Len() > 0 {
			b.WriteByte('-')
		}
		sep = false
		b.WriteRune(r)
	}
	return b.String()
}
