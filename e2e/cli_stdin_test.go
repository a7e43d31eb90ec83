package e2e

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIStdinReachesTheProgram: --stdin gives the program a file or the
// CLI's own stdin byte for byte, binary included, through run, submit
// (then follow) and eval, on a real server; the async path keeps the
// bytes in the queued request.
func TestCLIStdinReachesTheProgram(t *testing.T) {
	needRoot(t)
	s := startServer(t, t.TempDir())
	data := make([]byte, 300<<10)
	for i := range data {
		data[i] = byte(i*131 + i/7) // every byte value, and much invalid UTF-8
	}
	in := filepath.Join(t.TempDir(), "data.bin")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	const digest = "import hashlib, sys\nb = sys.stdin.buffer.read()\nprint(len(b), hashlib.sha256(b).hexdigest())\n"
	rd := writeScript(t, "rd.py", digest)
	want := fmt.Sprintf("%d %x\n", len(data), sha256.Sum256(data))

	for _, tt := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"run with a file", "", []string{"run", "-q", rd, "--stdin", in}},
		{"run with the CLI's stdin", string(data), []string{"run", "-q", rd, "--stdin", "-"}},
		{"eval", string(data), []string{"eval", "-q", "--stdin", "-", digest}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := cli(t, s.url, tt.stdin, tt.args...)
			if r.code != 0 || r.stdout != want {
				t.Errorf("exit %d, stdout %q, stderr %s; want %q", r.code, r.stdout, r.stderr, want)
			}
		})
	}
	t.Run("submit, then follow", func(t *testing.T) {
		sub := cli(t, s.url, "", "submit", rd, "--stdin", in)
		id := strings.TrimSpace(sub.stdout)
		if sub.code != 0 || !strings.HasPrefix(id, "exe_") {
			t.Fatalf("submit: exit %d, %q %s", sub.code, sub.stdout, sub.stderr)
		}
		if r := cli(t, s.url, "", "follow", "-q", id); r.code != 0 || r.stdout != want {
			t.Errorf("follow: exit %d, stdout %q, stderr %s; want %q", r.code, r.stdout, r.stderr, want)
		}
	})
}
