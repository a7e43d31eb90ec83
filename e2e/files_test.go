package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCLIFiles: a run that writes files notes them on stderr, `pyexec
// files` lists them and downloads each byte for byte, --outputs-dir saves
// them, and a symlink the script made is neither listed nor served.
func TestCLIFiles(t *testing.T) {
	needRoot(t)
	s := startServer(t, t.TempDir())
	script := writeScript(t, "write.py", `import hashlib, os
os.makedirs("out")
with open("out/report.csv", "w") as f:
    f.write("city,temp\nOslo,3\n")
with open("blob.bin", "wb") as f:
    f.write(bytes(range(256)) * 4)
os.symlink("/etc/passwd", "out/passwd")
for p in ("out/report.csv", "blob.bin"):
    print(p, hashlib.sha256(open(p, "rb").read()).hexdigest())
`)
	outDir := filepath.Join(t.TempDir(), "saved")
	r := cli(t, s.url, "", "run", "-v", "--outputs-dir", outDir, script)
	if r.code != 0 {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, note := range []string{"[file out/report.csv 17 B]", "[file blob.bin 1.0 KiB]"} {
		if !strings.Contains(r.stderr, note) {
			t.Errorf("run stderr lacks %q:\n%s", note, r.stderr)
		}
	}
	id := regexp.MustCompile(`Execution ID: (exe_[0-9a-f-]+)`).FindStringSubmatch(r.stderr)
	if id == nil {
		t.Fatalf("no execution id in:\n%s", r.stderr)
	}
	written := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		p, sum, _ := strings.Cut(line, " ")
		written[p] = sum
	}

	list := cli(t, s.url, "", "files", "-q", id[1])
	if list.code != 0 || list.stdout != "blob.bin\nout/report.csv\n" && list.stdout != "out/report.csv\nblob.bin\n" {
		t.Fatalf("files: exit %d stdout %q stderr %s", list.code, list.stdout, list.stderr)
	}
	for p, sum := range written {
		dst := filepath.Join(t.TempDir(), filepath.Base(p))
		if d := cli(t, s.url, "", "files", id[1], p, "-o", dst); d.code != 0 {
			t.Fatalf("download %s: exit %d: %s", p, d.code, d.stderr)
		}
		for _, got := range []string{dst, filepath.Join(outDir, p)} {
			data, err := os.ReadFile(got)
			h := sha256.Sum256(data)
			if err != nil || hex.EncodeToString(h[:]) != sum {
				t.Errorf("%s: sha256 %x (%v), the script wrote %s", got, h, err, sum)
			}
		}
	}
	d := cli(t, s.url, "", "files", id[1], "out/passwd")
	if d.code == 0 || bytes.Contains([]byte(d.stdout), []byte("root:")) || !strings.Contains(d.stderr, "file not found") {
		t.Fatalf("download of the symlink: exit %d stdout %q stderr %s", d.code, d.stdout, d.stderr)
	}
}
