//go:build linux

package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/egress/tlsca"
)

// TestCACommands: ca show says when there is no CA yet and prints the one
// serve made; ca rotate replaces it (another fingerprint, the one serve
// loads next) and says that a running server keeps the old one until it
// restarts; PYEXEC_DATA_DIR names the data directory as for serve.
func TestCACommands(t *testing.T) {
	data := t.TempDir()
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := execute(args, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if code, _, errOut := run("ca", "show", "--data-dir", data); code != 1 || !strings.Contains(errOut, "no egress CA in "+filepath.Join(data, egressCADir)) {
		t.Fatalf("show without a CA: exit %d, %q", code, errOut)
	}
	made, err := tlsca.LoadOrCreate(filepath.Join(data, egressCADir)) // what serve does
	if err != nil {
		t.Fatal(err)
	}
	fp := regexp.MustCompile(`(?m)^sha256 +([0-9A-F:]{95})$`)
	code, out, errOut := run("ca", "show", "--data-dir", data)
	if m := fp.FindStringSubmatch(out); code != 0 || m == nil || m[1] != made.Fingerprint() {
		t.Fatalf("show: exit %d, %q %q; want the fingerprint %s", code, out, errOut, made.Fingerprint())
	}
	t.Setenv("PYEXEC_DATA_DIR", data)
	code, out, errOut = run("ca", "rotate")
	m := fp.FindStringSubmatch(out)
	if code != 0 || m == nil || m[1] == made.Fingerprint() || !strings.Contains(out, "Restart the server") {
		t.Fatalf("rotate: exit %d, %q %q", code, out, errOut)
	}
	loaded, err := tlsca.LoadOrCreate(filepath.Join(data, egressCADir))
	if err != nil || loaded.Fingerprint() != m[1] {
		t.Fatalf("after the rotation serve would load %v, %v; want %s", loaded, err, m[1])
	}
}
