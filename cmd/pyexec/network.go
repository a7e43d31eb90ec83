//go:build linux

package main

import (
	"fmt"
	"os"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/egress"
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
