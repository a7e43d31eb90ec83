//go:build linux

package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/egress/tlsca"
)

const (
	secretsOne = `{"secrets": [{"name": "GITHUB_TOKEN", "value": "ghp_firstValue123", "hosts": ["api.github.com"],
	  "header": "Authorization: Bearer {value}"}]}`
	secretsTwo = `{"secrets": [{"name": "OTHER", "value": "second-value-456", "hosts": ["api.example.com"],
	  "header": "X-Key: {value}"}], "http_rules": [{"hosts": ["api.example.com"], "methods": ["GET"]}]}`
)

// TestSetupSecrets: --secrets-file makes the egress CA once under the data
// directory (its key 0600, in a directory of its own), writes the jails'
// trust bundle with it, and gives the egress what it needs to terminate
// TLS; SIGHUP swaps secrets and rules together, and a bad file on reload
// keeps the previous one (logged, without the value).
func TestSetupSecrets(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secrets.json")
	if err := os.WriteFile(file, []byte(secretsOne), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.AllowNetwork, cfg.DataDir, cfg.Network.SecretsFile = true, filepath.Join(dir, "data"), file
	ec := &egress.Config{}
	sec, err := setupSecrets(cfg, ec)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(cfg.DataDir, egressCADir, tlsca.KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v %v", fi, err)
	}
	caPEM, _ := os.ReadFile(filepath.Join(cfg.DataDir, egressCADir, tlsca.CertFile))
	bundle, _ := os.ReadFile(sec.bundle)
	if len(caPEM) == 0 || !bytes.Contains(bundle, caPEM) || filepath.Dir(sec.bundle) == filepath.Join(cfg.DataDir, egressCADir) {
		t.Errorf("bundle %s does not hold the CA, or sits beside its key", sec.bundle)
	}
	if ec.Intercept == nil || ec.Intercept.Issuer == nil || ec.Intercept.Roots == nil {
		t.Fatal("the egress cannot terminate TLS")
	}
	if _, ok := sec.catalog.Load().Secrets["GITHUB_TOKEN"]; !ok {
		t.Fatal("the file's secret is not in the catalog")
	}

	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sec.watch(ctx, log)
	hup := func() {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	// A bad file: the previous catalog stays, the log says why.
	if err := os.WriteFile(file, []byte(`{"secrets": [{"name": "X", "value": "short"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	hup()
	waitFor(t, func() bool { return strings.Contains(logs.String(), "not reloaded") })
	if _, ok := sec.catalog.Load().Secrets["GITHUB_TOKEN"]; !ok {
		t.Error("a bad file replaced the catalog")
	}
	// A good one replaces secrets and rules at once.
	if err := os.WriteFile(file, []byte(secretsTwo), 0o600); err != nil {
		t.Fatal(err)
	}
	hup()
	waitFor(t, func() bool { _, ok := sec.catalog.Load().Secrets["OTHER"]; return ok })
	if c := sec.catalog.Load(); len(c.Secrets) != 1 || len(c.Rules) != 1 {
		t.Errorf("after reload: %d secrets, %d rules", len(c.Secrets), len(c.Rules))
	}
	for _, v := range []string{"ghp_firstValue123", "second-value-456"} {
		if strings.Contains(logs.String(), v) {
			t.Errorf("the log holds a value: %s", logs.String())
		}
	}

	// No usable CA (a key others may read): the server does not start.
	if err := os.Chmod(filepath.Join(cfg.DataDir, egressCADir, tlsca.KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := setupSecrets(cfg, &egress.Config{}); err == nil || !strings.Contains(err.Error(), "egress CA") {
		t.Errorf("a server with secrets and no usable CA: %v, want a refusal", err)
	}
}

// lockedBuffer is a log the watcher writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits up to 5s for ok.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
