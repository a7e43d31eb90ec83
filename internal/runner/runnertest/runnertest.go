// Package runnertest finds, for tests, a Python interpreter that has pandas
// and matplotlib, so that the driver's rich outputs can be exercised for
// real, and probes what user code sees of its jail. It never runs in
// production code.
package runnertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BasePython is the interpreter a test environment is built on.
const BasePython = "/usr/bin/python3"

// packages are installed into the test environment.
const packages = "pandas matplotlib"

const probe = "import pandas, matplotlib"

// RichPython returns the absolute path of a python that imports pandas and
// matplotlib, and the directory a jail must mount for it (empty when it is
// the system interpreter). When BasePython lacks them, it builds a virtual
// environment once per machine under the user's cache directory with pip
// (about 20 s) and reuses it afterwards. It skips t with the reason when
// that is impossible (no PyPI, no venv module).
func RichPython(t testing.TB) (python, mount string) {
	t.Helper()
	if err := exec.Command(BasePython, "-c", probe).Run(); err == nil {
		return BasePython, ""
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no cache directory for a test environment with %s: %v", packages, err)
	}
	key := sha256.Sum256([]byte(BasePython + "\x00" + packages))
	dir := filepath.Join(cache, "pyexec-test", "rich-"+hex.EncodeToString(key[:6]))
	python = filepath.Join(dir, "bin", "python3")
	if exec.Command(python, "-c", probe).Run() == nil {
		return python, dir
	}
	if err := build(dir); err != nil {
		t.Skipf("cannot build a test environment with %s (PyPI unreachable?): %v", packages, err)
	}
	if out, err := exec.Command(python, "-c", probe).CombinedOutput(); err != nil {
		t.Skipf("test environment %s does not import %s: %v\n%s", dir, packages, err, out)
	}
	return python, dir
}

// build creates the environment in a scratch directory beside dir and
// renames it into place, so that concurrent test binaries never see half
// an environment (a venv that only runs bin/python survives the rename).
func build(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	steps := [][]string{
		{BasePython, "-m", "venv", tmp},
		append([]string{filepath.Join(tmp, "bin", "python3"), "-m", "pip", "install", "-q",
			"--disable-pip-version-check", "--timeout", "30"}, strings.Fields(packages)...),
	}
	for _, argv := range steps {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.WaitDelay = time.Second
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
		}
	}
	// Files a jail's unprivileged user must read.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		// ErrExist (EEXIST, ENOTEMPTY): another test binary won the race.
		return err
	}
	return nil
}

// PNGSize decodes a base64 PNG of a rich output and returns its size; the
// test fails if it is not a PNG that decodes.
func PNGSize(t testing.TB, b64 string) (width, height int) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	b := img.Bounds()
	return b.Dx(), b.Dy()
}
