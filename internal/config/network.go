package config

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/pyexec/pyexec/internal/egress"
)

// Network configures egress for executions that ask for network (with
// AllowNetwork): the operator's policy and the limits of each execution.
// See docs/network.md.
type Network struct {
	Allow      []string // rules a destination must match: names (*.x), IPs, CIDRs, with :port
	Deny       []string // rules that refuse a destination the allow list matched
	PolicyFile string   // more rules, one per line: "allow RULE" or "deny RULE"; '#' comments
	// Default gives network with the operator's list to a request that
	// says nothing about it (network_disabled absent); an explicit
	// network_disabled: true still turns it off.
	Default        bool
	MaxConns       int           // connections open at once per execution
	MaxBytesOut    int64         // bytes sent per execution
	MaxBytesIn     int64         // bytes received per execution
	ConnectTimeout time.Duration // for each connection the egress opens
	// Hosts pins names to addresses ("name=addr[,addr]"): the egress
	// answers those names from here and resolves no other name. For
	// tests and closed networks; empty: the system's resolver.
	Hosts []string
	// SecretsFile is the operator's secrets and HTTP rules
	// (docs/network.md), read at start and again on SIGHUP; "": none.
	SecretsFile string
	// CAFile adds roots the egress trusts for its own TLS to
	// destinations it terminates (private CAs); "": the host's roots.
	CAFile string
}

func defaultNetwork() Network {
	d := egress.DefaultLimits()
	return Network{MaxConns: d.MaxConns, MaxBytesOut: d.BytesOut, MaxBytesIn: d.BytesIn, ConnectTimeout: d.ConnectTimeout}
}

func (n *Network) bind(fs *pflag.FlagSet) {
	add := func(name, usage string) { describe(fs, name, usage) }
	fs.StringSliceVar(&n.Allow, "network-allow", n.Allow, "")
	add("network-allow", "destinations executions with network may reach: names (*.pypi.org), IPs, CIDRs, each with an optional :port or :lo-hi")
	fs.StringSliceVar(&n.Deny, "network-deny", n.Deny, "")
	add("network-deny", "destinations refused even when --network-allow matches them (same syntax)")
	fs.StringVar(&n.PolicyFile, "network-policy", n.PolicyFile, "")
	add("network-policy", `file of network rules, one per line: "allow RULE" or "deny RULE" ('#' comments)`)
	fs.BoolVar(&n.Default, "network-default", n.Default, "")
	add("network-default", "give network with the operator's list to requests that do not mention network_disabled (needs --allow-network)")
	fs.IntVar(&n.MaxConns, "network-max-conns", n.MaxConns, "")
	add("network-max-conns", "connections one execution may hold open at once; more ends it (reason network_limit)")
	fs.Var(sizeValue{&n.MaxBytesOut}, "network-max-bytes-out", "")
	add("network-max-bytes-out", "bytes one execution may send; more ends it (reason network_limit)")
	fs.Var(sizeValue{&n.MaxBytesIn}, "network-max-bytes-in", "")
	add("network-max-bytes-in", "bytes one execution may receive; more ends it (reason network_limit)")
	fs.Var(secondsValue{&n.ConnectTimeout}, "network-connect-timeout", "")
	add("network-connect-timeout", "how long the egress waits for a destination to accept a connection")
	fs.StringSliceVar(&n.Hosts, "network-hosts", n.Hosts, "")
	add("network-hosts", `pin names to addresses ("name=addr[,addr]"); the egress then resolves only these names (tests, closed networks)`)
	fs.StringVar(&n.SecretsFile, "secrets-file", n.SecretsFile, "")
	add("secrets-file", "JSON file of secrets the egress injects for executions that ask for them, and HTTP rules (re-read on SIGHUP; needs --allow-network)")
	fs.StringVar(&n.CAFile, "network-ca", n.CAFile, "")
	add("network-ca", "PEM file of roots the egress trusts, besides the host's, for its own TLS to destinations with a secret or HTTP rule")
}

func (c *Config) validateNetwork(bad func(env, format string, args ...any)) {
	n := c.Network
	if n.MaxConns < 1 || n.MaxBytesOut < 1 || n.MaxBytesIn < 1 || n.ConnectTimeout < 100*time.Millisecond {
		bad("PYEXEC_NETWORK_MAX_CONNS", "network limits must be positive (connect timeout at least 100ms)")
	}
	if n.Default && !c.AllowNetwork {
		bad("PYEXEC_NETWORK_DEFAULT", "needs PYEXEC_ALLOW_NETWORK")
	}
	if n.SecretsFile != "" && !c.AllowNetwork {
		bad("PYEXEC_SECRETS_FILE", "needs PYEXEC_ALLOW_NETWORK")
	}
	if n.CAFile != "" && n.SecretsFile == "" {
		bad("PYEXEC_NETWORK_CA", "needs PYEXEC_SECRETS_FILE: the egress opens TLS of its own only to destinations with a secret or HTTP rule")
	}
	if _, err := egress.ParseHosts(n.Hosts); err != nil {
		bad("PYEXEC_NETWORK_HOSTS", "%v", err)
	}
	p, err := n.Policy()
	if err != nil {
		bad("PYEXEC_NETWORK_ALLOW", "%v", err)
		return
	}
	if c.AllowNetwork && p.Empty() {
		bad("PYEXEC_ALLOW_NETWORK", "needs an allow list (PYEXEC_NETWORK_ALLOW or PYEXEC_NETWORK_POLICY): with none, nothing is reachable")
	}
}

// Policy parses the allow and deny lists and the policy file.
func (n Network) Policy() (egress.Policy, error) {
	allow, deny := append([]string(nil), n.Allow...), append([]string(nil), n.Deny...)
	if n.PolicyFile != "" {
		a, d, err := readPolicyFile(n.PolicyFile)
		if err != nil {
			return egress.Policy{}, err
		}
		allow, deny = append(allow, a...), append(deny, d...)
	}
	var p egress.Policy
	var err error
	if p.Allow, err = egress.ParseRules(allow); err != nil {
		return egress.Policy{}, err
	}
	if p.Deny, err = egress.ParseRules(deny); err != nil {
		return egress.Policy{}, err
	}
	return p, nil
}

// Limits are the per-execution egress limits.
func (n Network) Limits() egress.Limits {
	return egress.Limits{MaxConns: n.MaxConns, BytesOut: n.MaxBytesOut, BytesIn: n.MaxBytesIn, ConnectTimeout: n.ConnectTimeout}
}

// readPolicyFile reads "allow RULE" and "deny RULE" lines.
func readPolicyFile(name string) (allow, deny []string, _ error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, fmt.Errorf("network policy: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		verb, rule, _ := strings.Cut(strings.TrimSpace(line), " ")
		rule = strings.TrimSpace(rule)
		switch {
		case verb == "":
		case verb == "allow" && rule != "":
			allow = append(allow, rule)
		case verb == "deny" && rule != "":
			deny = append(deny, rule)
		default:
			return nil, nil, fmt.Errorf("network policy %s:%d: want \"allow RULE\" or \"deny RULE\", got %q", name, n, sc.Text())
		}
	}
	return allow, deny, sc.Err()
}
