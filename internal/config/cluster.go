package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Cluster says where the store lives: the embedded NATS server (the
// default) or an external NATS JetStream cluster shared by a fleet of
// servers, and what this server is called in that fleet.
type Cluster struct {
	// NATS is the comma-separated list of the cluster's client URLs; empty
	// runs the embedded server.
	NATS string
	// Creds, TLSCA, TLSCert and TLSKey are files: a NATS credentials file,
	// the CA that signs the servers' certificates, and this client's
	// certificate and key (both or neither).
	Creds   string
	TLSCA   string
	TLSCert string
	TLSKey  string
	// Replicas is the replication factor of every stream and bucket; zero
	// means 1 embedded and 3 on a cluster.
	Replicas int
	// NodeName names this server in the fleet (records say which node ran
	// an execution); a NATS subject token.
	NodeName string
	// AdvertiseURL is this node's API as the other nodes of the fleet
	// reach it (http[s]://host[:port]): a preview of a session held here,
	// asked of another node, is relayed to it. Empty: NodeURL's default.
	AdvertiseURL string
}

// NodeURL is the base URL this node advertises to the fleet: AdvertiseURL,
// else http://host:port of the listen address when that names one host
// (127.0.0.1 by default: right for nodes of one machine only), else ""
// (a wildcard such as 0.0.0.0 says nothing of how others reach it).
func (c Config) NodeURL() string {
	if c.Cluster.AdvertiseURL != "" {
		return strings.TrimSuffix(c.Cluster.AdvertiseURL, "/")
	}
	ip := net.ParseIP(c.Host)
	if c.Host == "" || ip != nil && ip.IsUnspecified() {
		return ""
	}
	return "http://" + c.Addr()
}

// External reports whether the store is an external cluster.
func (c Cluster) External() bool { return strings.TrimSpace(c.NATS) != "" }

// URLs are the cluster's client URLs, blanks dropped.
func (c Cluster) URLs() []string {
	var urls []string
	for _, u := range strings.Split(c.NATS, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}

// StoreReplicas is the replication factor to create the store with.
func (c Cluster) StoreReplicas() int {
	switch {
	case c.Replicas > 0:
		return c.Replicas
	case c.External():
		return 3
	default:
		return 1
	}
}

// ClusterAckWait is how long a job a node took from the queue stays
// invisible to other nodes on a cluster: short, so that the queued work of
// a node that died comes back fast. The embedded store keeps its default.
const ClusterAckWait = 10 * time.Second

func defaultCluster() Cluster { return Cluster{NodeName: defaultNodeName()} }

// defaultNodeName is the host name with every character a subject token
// may not hold replaced by '-'.
func defaultNodeName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "pyexec"
	}
	return strings.Map(func(r rune) rune {
		if isTokenRune(r) {
			return r
		}
		return '-'
	}, h)
}

func isTokenRune(r rune) bool {
	return r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

func (c *Cluster) bind(fs *pflag.FlagSet) {
	add := func(name, usage string) { describe(fs, name, usage) }
	fs.StringVar(&c.NATS, "nats", c.NATS, "")
	add("nats", "client URLs of an external NATS JetStream cluster, comma separated (nats://a:4222,nats://b:4222); empty: the embedded server")
	fs.StringVar(&c.Creds, "nats-creds", c.Creds, "")
	add("nats-creds", "NATS credentials file (user JWT and seed) for --nats")
	fs.StringVar(&c.TLSCA, "nats-tls-ca", c.TLSCA, "")
	add("nats-tls-ca", "CA certificate file that signs the NATS servers' certificates")
	fs.StringVar(&c.TLSCert, "nats-tls-cert", c.TLSCert, "")
	add("nats-tls-cert", "client certificate file for NATS (with --nats-tls-key)")
	fs.StringVar(&c.TLSKey, "nats-tls-key", c.TLSKey, "")
	add("nats-tls-key", "client key file for NATS (with --nats-tls-cert)")
	fs.IntVar(&c.Replicas, "nats-replicas", c.Replicas, "")
	add("nats-replicas", "replication factor of every stream and bucket; 0: 1 embedded, 3 with --nats")
	fs.StringVar(&c.NodeName, "node-name", c.NodeName, "")
	add("node-name", "this server's name in the fleet: letters, digits, - and _ (default: the host name)")
	fs.StringVar(&c.AdvertiseURL, "advertise-url", c.AdvertiseURL, "")
	add("advertise-url", "this node's API as the fleet's other nodes reach it, http[s]://host[:port]; they relay previews of its sessions there (default: http:// and --host:--port, unless --host is a wildcard)")
}

// BindCluster registers only the fleet flags (--nats and the rest), for
// commands that check the store the way serve would reach it (doctor).
func (c *Config) BindCluster(fs *pflag.FlagSet) { c.Cluster.bind(fs) }

// ValidateCluster checks only the fleet settings.
func (c *Config) ValidateCluster() error {
	var errs []error
	c.validateCluster(func(env, format string, args ...any) {
		errs = append(errs, c.problem(env, format, args...))
	})
	return errors.Join(errs...)
}

func (c *Config) validateCluster(bad func(env, format string, args ...any)) {
	cl := c.Cluster
	if cl.NodeName == "" || strings.IndexFunc(cl.NodeName, func(r rune) bool { return !isTokenRune(r) }) >= 0 {
		bad("PYEXEC_NODE_NAME", "must be letters, digits, - and _ only (it is a NATS subject token), got %q", cl.NodeName)
	}
	if cl.AdvertiseURL != "" {
		if err := CheckAdvertiseURL(cl.AdvertiseURL); err != nil {
			bad("PYEXEC_ADVERTISE_URL", "%v", err)
		}
	}
	if cl.Replicas < 0 || cl.Replicas > 5 {
		bad("PYEXEC_NATS_REPLICAS", "must be 0 (automatic) or 1-5, got %d", cl.Replicas)
	}
	external := cl.External()
	if external {
		for _, u := range cl.URLs() {
			if !strings.Contains(u, "://") {
				bad("PYEXEC_NATS", "each URL needs a scheme (nats://, tls://), got %q", u)
			}
		}
	} else {
		for _, f := range []struct{ env, val string }{
			{"PYEXEC_NATS_CREDS", cl.Creds}, {"PYEXEC_NATS_TLS_CA", cl.TLSCA},
			{"PYEXEC_NATS_TLS_CERT", cl.TLSCert}, {"PYEXEC_NATS_TLS_KEY", cl.TLSKey},
		} {
			if f.val != "" {
				bad(f.env, "needs PYEXEC_NATS (the embedded server takes no credentials)")
			}
		}
		if cl.Replicas > 1 {
			bad("PYEXEC_NATS_REPLICAS", "the embedded server keeps one copy; %d needs PYEXEC_NATS", cl.Replicas)
		}
	}
	if (cl.TLSCert == "") != (cl.TLSKey == "") {
		bad("PYEXEC_NATS_TLS_CERT", "needs PYEXEC_NATS_TLS_KEY and the other way round")
	}
	for _, f := range []struct{ env, path string }{
		{"PYEXEC_NATS_CREDS", cl.Creds}, {"PYEXEC_NATS_TLS_CA", cl.TLSCA},
		{"PYEXEC_NATS_TLS_CERT", cl.TLSCert}, {"PYEXEC_NATS_TLS_KEY", cl.TLSKey},
	} {
		if f.path == "" || !external {
			continue
		}
		if st, err := os.Stat(f.path); err != nil {
			bad(f.env, "%v", err)
		} else if st.IsDir() {
			bad(f.env, "%s is a directory, not a file", f.path)
		}
	}
}

// CheckAdvertiseURL accepts a base URL the fleet can relay to (this
// node's --advertise-url, and a peer's as read from the registry): http or
// https, a host, nothing after the port.
func CheckAdvertiseURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("want http://host[:port] or https://host[:port], got %q", raw)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("names no host: %q", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.Trim(u.Path, "/") != "":
		return fmt.Errorf("want only scheme, host and port, got %q", raw)
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%s is no address others can reach: name this node's own", u.Hostname())
	}
	return nil
}
