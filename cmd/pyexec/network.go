//go:build linux

package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/egress/tlsca"
)

// egressConfig builds the egress every execution with network goes
// through (docs/network.md). Network needs the jail and root: the egress
// device is made in each jail's network namespace from this process.
func egressConfig(cfg config.Config) (*egress.Config, error) {
	if cfg.UnsafeNoIsolation {
		return nil, fmt.Errorf("--allow-network needs the jail: without isolation a payload would have the host's network")
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("--allow-network needs a server running as root: each execution's egress device is made in its jail's network namespace")
	}
	policy, err := cfg.Network.Policy()
	if err != nil {
		return nil, err
	}
	guard, err := egress.NewGuard([]uint16{uint16(cfg.Port)})
	if err != nil {
		return nil, fmt.Errorf("reading this host's addresses: %w", err)
	}
	ec := &egress.Config{Policy: policy, Guard: guard, Limits: cfg.Network.Limits()}
	if len(cfg.Network.Hosts) > 0 {
		hosts, err := egress.ParseHosts(cfg.Network.Hosts)
		if err != nil {
			return nil, err
		}
		ec.Resolver = hosts
	}
	return ec, nil
}

// secretsSetup is what --secrets-file adds to a server with network: the
// operator's catalog (re-read on SIGHUP), the CA the egress terminates
// TLS with, and the bundle jails trust when their egress does.
type secretsSetup struct {
	file    string
	catalog *egress.LiveCatalog
	bundle  string // host path of the trust bundle
}

// Files of the egress CA and the jails' trust bundle, under DATA_DIR. The
// CA's key lives in a directory of its own (0700) that is never bound into
// a jail; the bundle, in another.
const (
	egressCADir    = "egress-ca"
	egressTrustDir = "egress-trust"
	trustBundle    = "ca-bundle.pem"
)

// setupSecrets reads the secrets file, makes (once) or reads the egress CA
// under the data directory, and gives ec what it needs to terminate TLS:
// a server whose file names secrets or HTTP rules does not start without a
// usable CA, since those destinations would be refused anyway.
func setupSecrets(cfg config.Config, ec *egress.Config) (*secretsSetup, error) {
	cat, err := loadCatalog(cfg.Network.SecretsFile)
	if err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	ca, err := tlsca.LoadOrCreate(filepath.Join(dataDir, egressCADir))
	if err != nil {
		return nil, fmt.Errorf("--secrets-file needs the egress CA (%s): %w", filepath.Join(dataDir, egressCADir), err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		return nil, fmt.Errorf("the host's roots: %w", err)
	}
	if cfg.Network.CAFile != "" {
		pem, err := os.ReadFile(cfg.Network.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--network-ca: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--network-ca %s: no PEM certificate in it", cfg.Network.CAFile)
		}
	}
	ec.Intercept = &egress.Interception{Issuer: ca, Roots: roots}
	bundle, err := writeTrustBundle(filepath.Join(dataDir, egressTrustDir), ca.CertPEM())
	if err != nil {
		return nil, err
	}
	return &secretsSetup{file: cfg.Network.SecretsFile, catalog: egress.NewLiveCatalog(cat), bundle: bundle}, nil
}

// loadCatalog reads and parses a secrets file. Its errors name secrets and
// fields, never values.
func loadCatalog(file string) (*egress.Catalog, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--secrets-file: %w", err)
	}
	return egress.ParseCatalog(data, egress.OSLookup)
}

// hostBundles are where distributions keep the roots they trust.
var hostBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem"}

// writeTrustBundle writes the host's roots and the egress CA's
// certificate into dir (replacing the file at once, so that a jail never
// reads half of it) and returns the file's path.
func writeTrustBundle(dir string, caPEM []byte) (string, error) {
	var host []byte
	for _, p := range hostBundles {
		if b, err := os.ReadFile(p); err == nil {
			host = b
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("trust bundle: %w", err)
	}
	data := append(append(append([]byte{}, host...), '\n'), caPEM...)
	path := filepath.Join(dir, trustBundle)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", fmt.Errorf("trust bundle: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("trust bundle: %w", err)
	}
	return path, nil
}

// watch re-reads the secrets file on each SIGHUP until ctx ends: a file
// that parses replaces secrets and HTTP rules at once for executions
// planned from then on; one that does not is logged (never a value) and
// the previous one stays.
func (s *secretsSetup) watch(ctx context.Context, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				s.reload(log)
			}
		}
	}()
}

// reload reads the secrets file again (watch).
func (s *secretsSetup) reload(log *slog.Logger) {
	cat, err := loadCatalog(s.file)
	if err != nil {
		log.Error("secrets file not reloaded: the previous one stays", "file", s.file, "err", err)
		return
	}
	s.catalog.Store(cat)
	log.Info("secrets file reloaded", "file", s.file, "secrets", len(cat.Secrets), "http_rules", len(cat.Rules))
}
