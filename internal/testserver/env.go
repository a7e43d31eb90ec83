package testserver

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinaryEnv names a pyexec binary built already (by make test, CI or a
// launcher), which Binary returns instead of building one.
const BinaryEnv = "PYEXEC_BINARY"

// Binary returns the pyexec binary to test: $PYEXEC_BINARY when set, else
// one built into dir from the module this process runs in (go build
// needs the module's source: a test's or `go run`'s working directory).
func Binary(dir string) (string, error) {
	if b := os.Getenv(BinaryEnv); b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", fmt.Errorf("%s: %w", BinaryEnv, err)
		}
		return abs, nil
	}
	out := filepath.Join(dir, "pyexec")
	build := exec.Command("go", "build", "-o", out, "github.com/pyexec/pyexec/cmd/pyexec")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building pyexec: %w", err)
	}
	return out, nil
}

// FreePort is a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// CleanEnv is this process's environment without the developer's PYEXEC_*
// settings, plus extra.
func CleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYEXEC_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// DataDir makes a fresh data directory under /var/tmp whose name starts
// with prefix, readable by all: jails mount environments from below it,
// which a private temporary directory's mode would hide from them.
func DataDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("/var/tmp", prefix)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
