package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestArtifactsRoundTrip(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{TTL: 2 * time.Hour})
	ctx := context.Background()
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, (3<<20)/4) // several object chunks
	files := []struct {
		id, path, mime string
		data           []byte
	}{
		{"exe_a", "out/report.csv", "text/csv", []byte("a,b\n1,2\n")},
		{"exe_a", "chart.png", "image/png", big},
		{"exe_ab", "other.txt", "text/plain", []byte("not exe_a's")},
	}
	for _, f := range files {
		a, err := s.PutArtifact(ctx, f.id, f.path, f.mime, f.data)
		if err != nil {
			t.Fatalf("PutArtifact %s: %v", f.path, err)
		}
		if a.Size != int64(len(f.data)) || len(a.SHA256) != 64 {
			t.Errorf("artifact %+v", a)
		}
	}
	for _, f := range files {
		t.Run(f.id+"/"+f.path, func(t *testing.T) {
			r, a, err := s.GetArtifact(ctx, f.id, f.path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, f.data) || a.Path != f.path || a.MIME != f.mime || a.Size != int64(len(f.data)) {
				t.Errorf("got %d bytes as %+v, want %d bytes of %s", len(got), a, len(f.data), f.mime)
			}
		})
	}
	list, err := s.ListArtifacts(ctx, "exe_a")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, a := range list {
		paths = append(paths, a.Path)
	}
	slices.Sort(paths)
	if strings.Join(paths, " ") != "chart.png out/report.csv" {
		t.Errorf("listed %v, want exe_a's two files only", paths)
	}
	if _, _, err := s.GetArtifact(ctx, "exe_a", "missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing artifact: %v, want ErrNotFound", err)
	}
	if l, err := s.ListArtifacts(ctx, "exe_none"); err != nil || len(l) != 0 {
		t.Errorf("list of an execution without files: %v %v", l, err)
	}
	st, err := s.artifacts.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != 2*time.Hour {
		t.Errorf("artifacts TTL %s, want the records' 2h", st.TTL())
	}
}
