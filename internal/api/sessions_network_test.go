package api

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestSessionRequestNetwork: a session's create takes the network fields
// of an execution's config (network_disabled, network.allow, secrets) and
// passes them to the engine, which checks the policy and the secrets; a
// session has network only when it asks, whatever the operator's default
// for executions.
func TestSessionRequestNetwork(t *testing.T) {
	f, tr := false, true
	for _, c := range []struct {
		name        string
		allow, def  bool
		in          SessionRequest
		wantErr     string
		wantNetwork bool
		wantAllow   []string
		wantSecrets []string
	}{
		{name: "absent means off, even with network by default", allow: true, def: true},
		{name: "asked", allow: true, in: SessionRequest{NetworkDisabled: &f}, wantNetwork: true},
		{name: "an allow list asks", allow: true, in: SessionRequest{Network: &NetworkConfig{Allow: []string{"pypi.org:443"}}},
			wantNetwork: true, wantAllow: []string{"pypi.org:443"}},
		{name: "secrets go to the engine", allow: true, in: SessionRequest{NetworkDisabled: &f, Secrets: []string{"GITHUB_TOKEN"}},
			wantNetwork: true, wantSecrets: []string{"GITHUB_TOKEN"}},
		{name: "refused by the operator", in: SessionRequest{NetworkDisabled: &f}, wantErr: "network access is disabled"},
		{name: "an allow list and network disabled", allow: true,
			in:      SessionRequest{NetworkDisabled: &tr, Network: &NetworkConfig{Allow: []string{"pypi.org"}}},
			wantErr: "network contradicts network_disabled"},
		{name: "a bad rule", allow: true, in: SessionRequest{Network: &NetworkConfig{Allow: []string{"pypi.org:99999"}}},
			wantErr: "network.allow[0]"},
	} {
		s := &Server{limits: limits{AllowNetwork: c.allow, NetworkDefault: c.def}}
		req, err := s.sessionRequest(context.Background(), c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: %v, want %q", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil || req.Network != c.wantNetwork || !slices.Equal(req.NetworkAllow, c.wantAllow) ||
			!slices.Equal(req.Secrets, c.wantSecrets) {
			t.Errorf("%s: network %v allow %q secrets %q (%v)", c.name, req.Network, req.NetworkAllow, req.Secrets, err)
		}
	}
}
