package sessions

import (
	"errors"
	"os"
	"testing"

	"github.com/pyexec/pyexec/internal/egress"
)

// TestSessionSecretsOfOwner: an operator may not run code in another
// key's session holding a secret kept for that key (the egress would
// inject it into the operator's code); it may in a session without
// secrets, or once the secret is for every key; the owner always may.
func TestSessionSecretsOfOwner(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		// as egresstest.New: its sessions have network, so an egress device
		t.Skipf("needs /dev/net/tun for the sessions' egress devices: %v", err)
	}
	pl, cat := netPlanner(t, nil)
	svc := newServiceDeps(t, Config{}, false, Deps{Network: pl})
	withSecret := live(t, svc, newSession(t, svc, Request{Network: true, Secrets: []string{"GITHUB_TOKEN"}}))
	without := live(t, svc, newSession(t, svc, Request{Network: true}))
	if err := svc.MayRunCode(withSecret, "ops"); !errors.Is(err, ErrSecretsOfOwner) {
		t.Errorf("an operator in a session with the owner's secret: %v, want ErrSecretsOfOwner", err)
	}
	if err := svc.MayRunCode(withSecret, tester); err != nil {
		t.Errorf("the owner's key: %v", err)
	}
	if err := svc.MayRunCode(without, "ops"); err != nil {
		t.Errorf("an operator in a session without secrets: %v", err)
	}
	open, err := egress.ParseCatalog([]byte(`{"secrets": [{"name": "GITHUB_TOKEN", "value": "`+sessionSecret+`",
		"hosts": ["allowed.test"], "header": "Authorization: Bearer {value}"}]}`), egress.OSLookup)
	if err != nil {
		t.Fatal(err)
	}
	cat.Store(open)
	if err := svc.MayRunCode(withSecret, "ops"); err != nil {
		t.Errorf("an operator once the secret is for every key: %v", err)
	}
}
