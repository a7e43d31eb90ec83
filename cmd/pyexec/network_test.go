//go:build linux

package main

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/egress"
)

// TestEgressConfig: network is refused without the jail, and the server's
// own port is denied on every address.
func TestEgressConfig(t *testing.T) {
	cfg := config.Default()
	cfg.AllowNetwork, cfg.Network.Allow, cfg.Port = true, []string{"pypi.org:443"}, 18080
	unsafe := cfg
	unsafe.UnsafeNoIsolation = true
	if _, err := egressConfig(unsafe); err == nil || !strings.Contains(err.Error(), "needs the jail") {
		t.Errorf("without isolation: %v, want a refusal", err)
	}
	ec, err := egressConfig(cfg)
	if os.Geteuid() != 0 {
		if err == nil {
			t.Error("a server that is not root got an egress")
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !ec.Policy.NameAllowed("pypi.org", 443) || ec.Policy.NameAllowed("pypi.org", 80) {
		t.Errorf("policy %+v", ec.Policy)
	}
	if r := ec.Guard.Check(netip.MustParseAddr("203.0.113.9"), 18080); r != egress.ReasonServerPort {
		t.Errorf("the API port on another address: %q, want %s", r, egress.ReasonServerPort)
	}
	if ec.Resolver != nil {
		t.Error("a resolver without pinned hosts: want the system's")
	}
	cfg.Network.Hosts = []string{"pypi.org=203.0.113.9"}
	if ec, err = egressConfig(cfg); err != nil || ec.Resolver == nil {
		t.Errorf("pinned hosts: %v, resolver %v", err, ec.Resolver)
	}
}
