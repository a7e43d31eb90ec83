// Package tlsca is the certificate authority of a server's egress: the CA
// the jails trust for the destinations whose TLS the egress terminates
// (those of secrets and HTTP rules), and the leaf certificates it issues
// for them, one per name, on demand.
//
// Its private key must never leave the server's process and its data
// directory: it is never written into a jail, an event, a record or a log.
// A jail gets only CertPEM.
package tlsca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Files of a CA kept in a directory (LoadOrCreate).
const (
	CertFile = "egress-ca.pem"
	KeyFile  = "egress-ca-key.pem"
)

// Lifetimes: the CA lasts ten years (until Rotate: `pyexec ca rotate`, see
// docs/network.md), a leaf a week (reissued a day before it ends).
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 7 * 24 * time.Hour
	leafRenew    = 24 * time.Hour
	// maxLeaves bounds the issued certificates kept: a wildcard secret
	// host lets a payload ask for many names.
	maxLeaves = 1024
)

// CA issues leaf certificates for the names the egress terminates.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// New makes a CA that lives in memory only (tests, and servers without a
// data directory).
func New() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial,
		Subject:   pkix.Name{CommonName: "pyexec egress CA", Organization: []string{"pyexec"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caLifetime),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		leaves: map[string]*tls.Certificate{}}, nil
}

// LoadOrCreate reads the CA kept in dir, or makes one and keeps it there
// (the key readable by the server's user only).
func LoadOrCreate(dir string) (*CA, error) {
	ca, err := Load(dir)
	if !errors.Is(err, os.ErrNotExist) {
		return ca, err
	}
	return create(dir)
}

// Load reads the CA kept in dir; an error that is os.ErrNotExist when
// dir holds neither of its files.
func Load(dir string) (*CA, error) {
	certPEM, cerr := os.ReadFile(filepath.Join(dir, CertFile))
	keyPEM, kerr := os.ReadFile(filepath.Join(dir, KeyFile))
	switch {
	case cerr == nil && kerr == nil:
		if err := privateFile(filepath.Join(dir, KeyFile)); err != nil {
			return nil, err
		}
		return parse(certPEM, keyPEM)
	case !errors.Is(cerr, os.ErrNotExist) && cerr != nil:
		return nil, cerr
	case !errors.Is(kerr, os.ErrNotExist) && kerr != nil:
		return nil, kerr
	case cerr == nil || kerr == nil:
		return nil, fmt.Errorf("tlsca: only one of %s and %s is in %s", CertFile, KeyFile, dir)
	}
	return nil, fmt.Errorf("tlsca: no CA in %s: %w", dir, os.ErrNotExist)
}

// create makes a CA and keeps it in dir, which must not hold one.
func create(dir string) (*CA, error) {
	ca, err := New()
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := writeNew(filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(filepath.Join(dir, CertFile), ca.certPEM, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// privateFile refuses a key file that others than its owner may read or
// write, or that another user owns (a key restored from a backup with the
// wrong mode is not used silently).
func privateFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("tlsca: %s is mode %o: the CA's key must be readable by its owner only (chmod 600)", path, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("tlsca: %s is owned by uid %d, not this server's user", path, st.Uid)
	}
	return nil
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// parse reads a CA's certificate and key.
func parse(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("tlsca: the CA's files are not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tlsca: the CA's certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, errors.New("tlsca: the CA's key does not parse") // never the key's bytes
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("tlsca: the CA's certificate is not a CA of its key")
	}
	if time.Now().After(cert.NotAfter) {
		return nil, errors.New("tlsca: the CA expired; rotate it: pyexec ca rotate (docs/network.md)")
	}
	return &CA{cert: cert, key: key, certPEM: pem.EncodeToMemory(cb), leaves: map[string]*tls.Certificate{}}, nil
}

// Rotate replaces the CA kept in dir (if any) by a new one and returns
// it. The new CA is made beside dir and swapped in by renames, and the old
// key is deleted: a rotation cut short leaves either CA whole, or none
// (then the next LoadOrCreate makes one). A server that runs keeps the CA
// it loaded until it restarts.
func Rotate(dir string) (*CA, error) {
	next, old := dir+".new", dir+".old"
	for _, d := range []string{next, old} { // left by a rotation cut short
		if err := os.RemoveAll(d); err != nil {
			return nil, err
		}
	}
	ca, err := create(next)
	if err != nil {
		return nil, err
	}
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.Rename(next, dir); err != nil {
		return nil, err
	}
	return ca, os.RemoveAll(old)
}

// Fingerprint is the SHA-256 of the CA's certificate, in hex pairs
// separated by colons (as openssl x509 -fingerprint -sha256 prints it).
func (c *CA) Fingerprint() string {
	sum := sha256.Sum256(c.cert.Raw)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

// NotAfter is when the CA's certificate ends.
func (c *CA) NotAfter() time.Time { return c.cert.NotAfter }

// CertPEM is the CA's certificate, what the jails trust.
func (c *CA) CertPEM() []byte { return c.certPEM }

// Certificate returns a certificate for name (a DNS name), signed by the
// CA, issued once and kept until a day before it ends. Keys are made and
// signed outside the lock (one payload walking through names does not
// hold up another's handshakes); at maxLeaves one other leaf makes room,
// not all of them.
func (c *CA) Certificate(name string) (*tls.Certificate, error) {
	now := time.Now()
	c.mu.Lock()
	leaf, ok := c.leaves[name]
	c.mu.Unlock()
	if ok && now.Add(leafRenew).Before(leaf.Leaf.NotAfter) {
		return leaf, nil
	}
	cert, err := c.issue(name, now)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.leaves[name]; !ok && len(c.leaves) >= maxLeaves {
		for other := range c.leaves {
			delete(c.leaves, other)
			break
		}
	}
	c.leaves[name] = cert
	return cert, nil
}

// issue makes a key and a leaf certificate for name, valid from now.
func (c *CA) issue(name string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	end := now.Add(leafLifetime)
	if end.After(c.cert.NotAfter) {
		end = c.cert.NotAfter
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: now.Add(-time.Hour), NotAfter: end,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// serialNumber draws a random 128-bit serial.
func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}
