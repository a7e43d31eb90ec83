package tlsca

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
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

// TestRotate: a rotation replaces the kept CA by a new one that is read
// back from then on; a leaf of the new CA does not verify against the old
// one; the old key is gone and no half-made directory is left; a rotation
// where there was no CA makes one.
func TestRotate(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "egress-ca")
	old, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	oldKey, err := os.ReadFile(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	// What a rotation cut short left.
	if err := os.MkdirAll(dir+".new", 0o700); err != nil {
		t.Fatal(err)
	}
	ca, err := Rotate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Fingerprint() == old.Fingerprint() {
		t.Fatal("the rotated CA is the old one")
	}
	loaded, err := Load(dir)
	if err != nil || loaded.Fingerprint() != ca.Fingerprint() {
		t.Fatalf("after the rotation Load gives %v, %v; want the new CA", loaded, err)
	}
	newKey, err := os.ReadFile(filepath.Join(dir, KeyFile))
	if err != nil || bytes.Equal(newKey, oldKey) {
		t.Fatalf("the key file kept the old key (%v)", err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the new key file: %v, %v; want mode 0600", fi, err)
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("the CA directory: %v, %v; want mode 0700", di, err)
	}
	entries, err := os.ReadDir(parent)
	if err != nil || len(entries) != 1 {
		t.Fatalf("beside the CA directory after the rotation: %v, %v", entries, err)
	}
	leaf, err := ca.Certificate("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	oldPool := x509.NewCertPool()
	oldPool.AppendCertsFromPEM(old.CertPEM())
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.com", Roots: oldPool}); err == nil {
		t.Error("a leaf of the new CA verifies against the old one")
	}
	newPool := x509.NewCertPool()
	newPool.AppendCertsFromPEM(ca.CertPEM())
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.com", Roots: newPool}); err != nil {
		t.Errorf("a leaf of the new CA does not verify against it: %v", err)
	}

	fresh := filepath.Join(parent, "none-yet")
	if _, err := Load(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of a directory without a CA: %v, want os.ErrNotExist", err)
	}
	if _, err := Rotate(fresh); err != nil {
		t.Fatalf("rotating where there was no CA: %v", err)
	}
	if _, err := Load(fresh); err != nil {
		t.Errorf("after rotating where there was none: %v", err)
	}
}
