package tlsca

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestLoadOrCreate: a CA made in a directory is kept there, its key
// readable by the server's user alone, and read back the same.
func TestLoadOrCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ca, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	again, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca.CertPEM(), again.CertPEM()) {
		t.Error("the CA read back is another one")
	}
	// A key others may read (restored from a backup with the wrong mode)
	// is refused, not used.
	if err := os.Chmod(filepath.Join(dir, KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(dir); err == nil {
		t.Error("a world-readable key was used")
	}
	if err := os.Chmod(filepath.Join(dir, KeyFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, CertFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(dir); err == nil {
		t.Error("a key without its certificate was accepted (or replaced)")
	}
}

// TestCertificate: a leaf verifies for its name against the CA's
// certificate alone, and for no other name.
func TestCertificate(t *testing.T) {
	ca, err := New()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.CertPEM()) {
		t.Fatal("CertPEM does not parse")
	}
	c, err := ca.Certificate("api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "api.example.test"}); err != nil {
		t.Errorf("leaf does not verify for its name: %v", err)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other.example.test"}); err == nil {
		t.Error("leaf verifies for another name")
	}
	if again, _ := ca.Certificate("api.example.test"); again != c {
		t.Error("the leaf was issued again instead of kept")
	}
	other, err := New()
	if err != nil {
		t.Fatal(err)
	}
	otherRoots := x509.NewCertPool()
	otherRoots.AppendCertsFromPEM(other.CertPEM())
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: otherRoots, DNSName: "api.example.test"}); err == nil {
		t.Error("leaf verifies against another CA")
	}
}

// TestLeavesKept: past maxLeaves names one leaf makes room for the next,
// the others stay (a payload walking through names does not evict every
// other execution's leaves); a name asked again gets the same leaf.
func TestLeavesKept(t *testing.T) {
	ca, err := New()
	if err != nil {
		t.Fatal(err)
	}
	var last *tls.Certificate
	for i := 0; i <= maxLeaves; i++ {
		if last, err = ca.Certificate(fmt.Sprintf("n%d.test", i)); err != nil {
			t.Fatal(err)
		}
	}
	ca.mu.Lock()
	n := len(ca.leaves)
	ca.mu.Unlock()
	if n != maxLeaves {
		t.Errorf("%d leaves kept after %d names, want %d", n, maxLeaves+1, maxLeaves)
	}
	again, err := ca.Certificate(fmt.Sprintf("n%d.test", maxLeaves))
	if err != nil {
		t.Fatal(err)
	}
	if again != last {
		t.Error("a name asked again got another leaf")
	}
}
