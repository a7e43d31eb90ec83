package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestFontconfigIsQuiet: programs that ask fontconfig (matplotlib runs
// fc-list) find a configuration in the jail and print no error.
func TestFontconfigIsQuiet(t *testing.T) {
	m := needJail(t)
	fcList, err := exec.LookPath("fc-list")
	if err != nil {
		t.Skip("fc-list is not installed on this host")
	}
	r := runPy(t, m, `import subprocess
p = subprocess.run([`+quote(fcList)+`, "--format", "%{file}\n"], capture_output=True, text=True)
print("STDERR", repr(p.stderr))
print("FONTS", len(p.stdout.splitlines()))`)
	printed("STDERR ''")(t, r)
	if fonts, err := os.ReadDir("/usr/share/fonts"); err == nil && len(fonts) > 0 {
		notPrinted("FONTS 0\n")(t, r)
	}
}

// TestMountSourceUnderTmp: a host path under /tmp, which the jail hides
// behind its own /tmp, can still be mounted at a target outside it.
func TestMountSourceUnderTmp(t *testing.T) {
	m := needJail(t)
	dir, err := os.MkdirTemp("/tmp", "pyexec-mount-src-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tool.txt"), []byte("from-tmp"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runPy(t, m, `print(open("/opt/pyexec-test/dir/tool.txt").read(), open("/opt/pyexec-test/file.txt").read())`,
		func(s *Spec) {
			s.Mounts = []Mount{{Source: dir, Target: "/opt/pyexec-test/dir"},
				{Source: filepath.Join(dir, "tool.txt"), Target: "/opt/pyexec-test/file.txt"}}
		})
	printed("from-tmp from-tmp")(t, r)
}
