package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClusterSettings(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "pyexec.creds")
	if err := os.WriteFile(creds, []byte("-----BEGIN NATS USER JWT-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		args         []string
		env          map[string]string
		wantErr      string // substring of the validation error; "" means valid
		wantExternal bool
		wantReplicas int
		wantURLs     []string
		wantNode     string
	}{
		{name: "embedded by default, one copy", wantReplicas: 1},
		{name: "a cluster replicates three times", args: []string{"--nats", "nats://a:4222, nats://b:4222", "--node-name", "node_1"},
			wantExternal: true, wantReplicas: 3, wantURLs: []string{"nats://a:4222", "nats://b:4222"}, wantNode: "node_1"},
		{name: "environment names the cluster and replicas", env: map[string]string{"PYEXEC_NATS": "tls://n:4222",
			"PYEXEC_NATS_REPLICAS": "5", "PYEXEC_NODE_NAME": "eu-1", "PYEXEC_NATS_CREDS": creds},
			wantExternal: true, wantReplicas: 5, wantURLs: []string{"tls://n:4222"}, wantNode: "eu-1"},
		{name: "a node name with a dot is refused", args: []string{"--node-name", "a.b"}, wantErr: "PYEXEC_NODE_NAME"},
		{name: "a node name with a wildcard is refused", args: []string{"--node-name", "a*"}, wantErr: "PYEXEC_NODE_NAME"},
		{name: "an empty node name is refused", args: []string{"--node-name", ""}, wantErr: "PYEXEC_NODE_NAME"},
		{name: "replicas beyond 5 are refused", args: []string{"--nats", "nats://a:4222", "--nats-replicas", "7"}, wantErr: "PYEXEC_NATS_REPLICAS"},
		{name: "embedded cannot replicate", args: []string{"--nats-replicas", "3"}, wantErr: "PYEXEC_NATS_REPLICAS"},
		{name: "credentials need a cluster", args: []string{"--nats-creds", creds}, wantErr: "--nats-creds (PYEXEC_NATS_CREDS): needs --nats"},
		{name: "a URL without scheme is refused", args: []string{"--nats", "a:4222"}, wantErr: "--nats (PYEXEC_NATS): each URL needs a scheme"},
		{name: "a missing credentials file is refused", args: []string{"--nats", "nats://a:4222", "--nats-creds", creds + ".missing"},
			wantErr: "PYEXEC_NATS_CREDS"},
		{name: "a client certificate needs its key", args: []string{"--nats", "nats://a:4222", "--nats-tls-cert", creds},
			wantErr: "--nats-tls-cert (PYEXEC_NATS_TLS_CERT): needs --nats-tls-key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.args, tt.env)
			if err != nil {
				t.Fatalf("resolve: %v", err)
			}
			err = c.Validate()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
				}
				if cerr := c.ValidateCluster(); cerr == nil || !strings.Contains(cerr.Error(), tt.wantErr) {
					t.Errorf("ValidateCluster() = %v, want an error containing %q", cerr, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			cl := c.Cluster
			if cl.External() != tt.wantExternal || cl.StoreReplicas() != tt.wantReplicas {
				t.Errorf("external %v replicas %d, want %v and %d", cl.External(), cl.StoreReplicas(), tt.wantExternal, tt.wantReplicas)
			}
			if strings.Join(cl.URLs(), " ") != strings.Join(tt.wantURLs, " ") {
				t.Errorf("URLs %q, want %q", cl.URLs(), tt.wantURLs)
			}
			if tt.wantNode != "" && cl.NodeName != tt.wantNode {
				t.Errorf("node %q, want %q", cl.NodeName, tt.wantNode)
			}
		})
	}
}

func TestDefaultNodeNameIsASubjectToken(t *testing.T) {
	c := Default()
	if err := c.ValidateCluster(); err != nil {
		t.Fatalf("the default node name %q (from the host name) is refused: %v", c.Cluster.NodeName, err)
	}
	if h, err := os.Hostname(); err == nil && !strings.ContainsAny(h, ".*> ") && c.Cluster.NodeName != h {
		t.Errorf("default node name %q, want the host name %q", c.Cluster.NodeName, h)
	}
}

// TestAdvertiseURL: the URL a node advertises is --advertise-url, else
// its listen address when that names one host; a URL the fleet could not
// relay to is refused.
func TestAdvertiseURL(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string // NodeURL
		wantErr string
	}{
		{name: "the listen address by default", args: []string{"--port", "9000"}, want: "http://127.0.0.1:9000"},
		{name: "an IPv6 listen address", args: []string{"--host", "::1", "--port", "9000"}, want: "http://[::1]:9000"},
		{name: "none on a wildcard address", args: []string{"--host", "0.0.0.0"}, want: ""},
		{name: "none on the IPv6 wildcard", args: []string{"--host", "::"}, want: ""},
		{name: "the flag wins", args: []string{"--host", "0.0.0.0", "--advertise-url", "https://node-a.internal:8443/"},
			want: "https://node-a.internal:8443"},
		{name: "the environment", env: map[string]string{"PYEXEC_ADVERTISE_URL": "http://10.0.0.5:8080"}, want: "http://10.0.0.5:8080"},
		{name: "no scheme", args: []string{"--advertise-url", "node-a:8080"}, wantErr: "PYEXEC_ADVERTISE_URL"},
		{name: "another scheme", args: []string{"--advertise-url", "ftp://node-a"}, wantErr: "want http://host[:port]"},
		{name: "a path", args: []string{"--advertise-url", "http://node-a/api"}, wantErr: "only scheme, host and port"},
		{name: "credentials", args: []string{"--advertise-url", "http://u:p@node-a"}, wantErr: "only scheme, host and port"},
		{name: "a query", args: []string{"--advertise-url", "http://node-a/?x=1"}, wantErr: "only scheme, host and port"},
		{name: "no host", args: []string{"--advertise-url", "http://:8080"}, wantErr: "names no host"},
		{name: "a wildcard host", args: []string{"--advertise-url", "http://0.0.0.0:8080"}, wantErr: "no address others can reach"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, append([]string{"--api-keys", "a:key-of-a-0123456789"}, tt.args...), tt.env)
			if err != nil {
				t.Fatalf("resolve: %v", err)
			}
			err = c.Validate()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			if got := c.NodeURL(); got != tt.want {
				t.Errorf("NodeURL() = %q, want %q", got, tt.want)
			}
		})
	}
}
