package egresstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
)

// Pinned versions of the Python HTTP clients payloads use in the tests.
const (
	RequestsVersion = "2.32.3"
	HTTPXVersion    = "0.28.1"
)

// ClientsEnv carries the directory InstallClients made to a test binary
// that Isolate runs, which cannot reach PyPI from its namespace.
const ClientsEnv = "PYEXEC_EGRESS_TEST_CLIENTS"

// Clients returns the directory holding requests and httpx for
// /usr/bin/python3 (see InstallClients), for a jail to mount and a payload
// to put on its PYTHONPATH; it skips the test when there is none.
func Clients(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(ClientsEnv)
	if dir == "" {
		t.Skipf("requests and httpx were not installed before the suite entered its namespace (%s unset)", ClientsEnv)
	}
	return dir
}

// InstallClients installs the pinned requests and httpx from PyPI with
// pip into a cache directory (outside /tmp and /work, which jails
// reserve) unless they are there already, and returns the directory. It
// runs before a suite isolates itself.
func InstallClients() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the test clients: %w", err)
	}
	for _, reserved := range []string{"/tmp", "/work"} {
		if cache == reserved || strings.HasPrefix(cache, reserved+"/") {
			cache = "/var/tmp"
		}
	}
	dir := filepath.Join(cache, "pyexec-test-tools", "requests-"+RequestsVersion+"-httpx-"+HTTPXVersion)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	// Test binaries of several packages may get here at once.
	lock, err := os.OpenFile(dir+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "httpx", "__init__.py")); err == nil {
		return dir, nil
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-m", "pip", "install", "--disable-pip-version-check",
		"--no-input", "--target", tmp, "requests=="+RequestsVersion, "httpx=="+HTTPXVersion).CombinedOutput()
	if err != nil {
		os.RemoveAll(tmp)
		if !pyenvtest.PyPIReachable() {
			return "", fmt.Errorf("PyPI is unreachable: %w", err)
		}
		return "", fmt.Errorf("installing requests and httpx: %w\n%s", err, out)
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755)
}
