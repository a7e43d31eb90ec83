package pyenvtest

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Pinned versions of the helper tools the tests install.
const (
	UVVersion   = "0.13.9"
	RuffVersion = "0.17.6"
)

// Tools returns the paths of uv and ruff, installing the pinned versions
// from PyPI with `python3 -m pip install --target` into a cache directory
// ($PYEXEC_TEST_TOOLS, else the user's cache directory, or /var/tmp when
// that is under /tmp or /work) on first use. When
// they cannot be installed because PyPI is unreachable the test is
// skipped with the reason; any other failure fails it.
func Tools(t testing.TB) (uv, ruff string) {
	t.Helper()
	dir := os.Getenv("PYEXEC_TEST_TOOLS")
	if dir == "" {
		dir = filepath.Join(cacheBase(t), "pyexec-test-tools", "uv-"+UVVersion+"-ruff-"+RuffVersion)
	}
	uv, ruff = filepath.Join(dir, "bin", "uv"), filepath.Join(dir, "bin", "ruff")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	// Test binaries of several packages may get here at once.
	lock, err := os.OpenFile(dir+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if isExec(uv) && isExec(ruff) {
		return uv, ruff
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to install uv and ruff: %v", err)
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
		"--target", tmp, "uv=="+UVVersion, "ruff=="+RuffVersion)
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.RemoveAll(tmp)
		if !PyPIReachable() {
			t.Skipf("uv and ruff cannot be installed: PyPI is unreachable (%v)", err)
		}
		t.Fatalf("installing uv and ruff: %v\n%s", err, out)
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	// The jail runs ruff as an unprivileged user.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if !isExec(uv) || !isExec(ruff) {
		t.Fatalf("pip installed uv and ruff but %s or %s is missing", uv, ruff)
	}
	return uv, ruff
}

// PyPIReachable reports whether https://pypi.org/simple/ answers.
func PyPIReachable() bool {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Head("https://pypi.org/simple/pip/")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 500
}

// cacheBase is the user's cache directory, or /var/tmp when that is under
// /tmp or /work (a HOME there is common in CI): the jail mounts ruff's
// directory at its own path, which cannot be there, and uv hard-links
// from its download cache into environments made under /var/tmp
// (EnvDir), which needs the same file system.
func cacheBase(t testing.TB) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache directory for the test tools: %v", err)
	}
	for _, reserved := range []string{"/tmp", "/work"} {
		if cache == reserved || strings.HasPrefix(cache, reserved+"/") {
			cache = "/var/tmp"
		}
	}
	return cache
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// EnvDir returns a new directory for environments that jails can mount:
// outside /tmp (reserved inside the jail) and readable by the payload
// user. It is removed when the test ends.
func EnvDir(t testing.TB) string {
	t.Helper()
	base := os.Getenv("PYEXEC_TEST_ENV_DIR")
	if base == "" {
		base = "/var/tmp"
	}
	dir, err := os.MkdirTemp(base, "pyexec-envs-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// PyPIEnvDir is EnvDir for tests that install from the real PyPI: uv's
// download cache in it (cache/uv, where an Environments on it keeps its
// cache) is a link to one directory kept between runs
// ($PYEXEC_TEST_UV_CACHE, else pyexec-test-uv-cache in the user's cache
// directory), so that a run downloads a wheel (Streamlit's, pandas's)
// once per machine instead of once per test. The index is still asked
// every time: what a test resolves and installs is PyPI's answer of the
// day. uv locks its cache for runs of several packages at once.
func PyPIEnvDir(t testing.TB) string {
	t.Helper()
	dir := EnvDir(t)
	shared := os.Getenv("PYEXEC_TEST_UV_CACHE")
	if shared == "" {
		shared = filepath.Join(cacheBase(t), "pyexec-test-uv-cache")
	}
	if err := os.MkdirAll(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "cache"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shared, filepath.Join(dir, "cache", "uv")); err != nil {
		t.Fatal(err)
	}
	return dir
}
