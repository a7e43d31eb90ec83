package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNetworkConfig(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy")
	if err := os.WriteFile(policy, []byte("# PyPI\nallow *.pypi.org\nallow files.pythonhosted.org:443\ndeny evil.pypi.org\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("permit pypi.org\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		set     func(*Config)
		wantErr string
	}{
		{"network off needs nothing", func(c *Config) {}, ""},
		{"an allow list", func(c *Config) { c.AllowNetwork, c.Network.Allow = true, []string{"pypi.org"} }, ""},
		{"a policy file", func(c *Config) { c.AllowNetwork, c.Network.PolicyFile = true, policy }, ""},
		{"network without a list", func(c *Config) { c.AllowNetwork = true }, "PYEXEC_ALLOW_NETWORK: needs an allow list"},
		{"a bad rule", func(c *Config) { c.AllowNetwork, c.Network.Allow = true, []string{"pypi.org:0"} }, "PYEXEC_NETWORK_ALLOW"},
		{"a bad policy line", func(c *Config) { c.AllowNetwork, c.Network.PolicyFile = true, bad }, "bad:1"},
		{"a missing policy file", func(c *Config) { c.AllowNetwork, c.Network.PolicyFile = true, filepath.Join(dir, "none") }, "no such file"},
		{"default without network", func(c *Config) { c.Network.Default = true }, "PYEXEC_NETWORK_DEFAULT"},
		{"bad pinned host", func(c *Config) { c.Network.Hosts = []string{"pypi.org"} }, "PYEXEC_NETWORK_HOSTS"},
		{"zero limit", func(c *Config) { c.Network.MaxConns = 0 }, "network limits must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
	c := Default()
	c.Network.PolicyFile = policy
	p, err := c.Network.Policy()
	if err != nil {
		t.Fatal(err)
	}
	if !p.NameAllowed("files.pypi.org", 443) || p.NameAllowed("evil.pypi.org", 443) || p.NameAllowed("files.pythonhosted.org", 80) {
		t.Errorf("policy from the file decides wrongly: %+v", p)
	}
}
