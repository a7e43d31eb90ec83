package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ClusterOptions say how to reach an external NATS JetStream cluster.
type ClusterOptions struct {
	URLs []string // client URLs; the client learns the others from the cluster
	// Creds is a credentials file (user JWT and seed); TLSCA, TLSCert and
	// TLSKey are PEM files: the servers' CA and this client's pair.
	Creds, TLSCA, TLSCert, TLSKey string
	// Node names this server; it appears in the servers' connection lists.
	Node   string
	Logger *slog.Logger
	// OnWait hears of each failed attempt to connect: ConnectCluster
	// waits for a server to answer (see wait.go).
	OnWait WaitFunc
}

// Cluster holds the two connections of a node to an external cluster:
// one for the store and one for event followers (see FollowersOn). Both
// reconnect forever, with a growing jittered delay, when a server goes.
type Cluster struct {
	nc     *nats.Conn
	follow *nats.Conn
	closed chan struct{} // closed once nc is closed
}

// Reconnect delays: the first retry comes fast, later ones back off up to
// maxReconnectDelay so that a fleet does not hammer a cluster that is down.
const (
	minReconnectDelay = 250 * time.Millisecond
	maxReconnectDelay = 5 * time.Second
)

// reconnectDelay is the wait before reconnect attempt n (counted from 1
// for every pass over the server list): doubling, capped, with up to a
// quarter of jitter.
func reconnectDelay(attempts int) time.Duration {
	d := minReconnectDelay
	for i := 1; i < attempts && d < maxReconnectDelay; i++ {
		d *= 2
	}
	d = min(d, maxReconnectDelay)
	return d + rand.N(d/4+1)
}

// ConnectCluster connects to the cluster at opts.URLs, waiting and
// retrying while no server answers (telling opts.OnWait) until ctx ends;
// it fails at once when a server refuses the credentials or certificate.
// Afterwards the connections reconnect by themselves and log when they
// lose or regain a server.
func ConnectCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	if len(opts.URLs) == 0 {
		return nil, errors.New("store: no NATS URL given")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	closed := make(chan struct{})
	nc, err := connectCluster(ctx, opts, "pyexec-"+opts.Node, log, nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		return nil, err
	}
	follow, err := connectCluster(ctx, opts, "pyexec-"+opts.Node+"-followers", log)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &Cluster{nc: nc, follow: follow, closed: closed}, nil
}

func connectCluster(ctx context.Context, opts ClusterOptions, name string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	o := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(reconnectDelay),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if err == nil && c.IsClosed() {
				return // our own Close
			}
			log.Warn("lost the NATS server", "connection", name, "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("reconnected to NATS", "connection", name, "server", withoutUserinfo(c.ConnectedUrl()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("NATS connection error", "connection", name, "err", err)
		}),
	}
	if opts.Creds != "" {
		o = append(o, nats.UserCredentials(opts.Creds))
	}
	if opts.TLSCA != "" {
		o = append(o, nats.RootCAs(opts.TLSCA))
	}
	if opts.TLSCert != "" || opts.TLSKey != "" {
		o = append(o, nats.ClientCert(opts.TLSCert, opts.TLSKey))
	}
	o = append(o, extra...)
	urls := withoutUserinfo(joinURLs(opts.URLs))
	var nc *nats.Conn
	err := retry(ctx, "connecting to NATS at "+urls, opts.OnWait, func(err error) error { return err }, func(ctx context.Context) error {
		attempt := o
		if d, ok := ctx.Deadline(); ok {
			attempt = append(slices.Clip(o), nats.Timeout(time.Until(d)))
		}
		var err error
		nc, err = nats.Connect(joinURLs(opts.URLs), attempt...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return nc, nil
}

func joinURLs(urls []string) string { return strings.Join(urls, ",") }

// withoutUserinfo drops what comes before '@' in each of the
// comma-separated URLs: a token, or a user and password. Go's URL
// redaction hides only a password, and a NATS token is the user part;
// what this returns is shown on /health, which needs no API key.
func withoutUserinfo(urls string) string {
	parts := strings.Split(urls, ",")
	for i, u := range parts {
		scheme, rest, ok := strings.Cut(u, "://")
		if !ok {
			scheme, rest = "", u
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = rest[at+1:]
		}
		if ok {
			rest = scheme + "://" + rest
		}
		parts[i] = rest
	}
	return strings.Join(parts, ",")
}

// Conn is the store's connection. It stays valid until Close.
func (c *Cluster) Conn() *nats.Conn { return c.nc }

// FollowConn is the followers' connection, to pass to FollowersOn.
func (c *Cluster) FollowConn() *nats.Conn { return c.follow }

// Status reports the store connection.
func (c *Cluster) Status() NATSStatus {
	return NATSStatus{Mode: ModeCluster, Connected: c.nc.IsConnected(), Server: withoutUserinfo(c.nc.ConnectedUrl())}
}

// Close drains the store's connection (what it published reaches the
// cluster) and closes both.
func (c *Cluster) Close() error {
	c.follow.Close()
	err := c.nc.Drain()
	if err == nil {
		<-c.closed
	}
	c.nc.Close()
	if err != nil {
		return fmt.Errorf("store: draining NATS connection: %w", err)
	}
	return nil
}

// Modes of NATSStatus.
const (
	ModeEmbedded = "embedded"
	ModeCluster  = "cluster"
)

// NATSStatus is what /health says about the store's NATS connection.
type NATSStatus struct {
	Mode      string // ModeEmbedded or ModeCluster
	Connected bool
	Server    string // the URL connected to; empty when embedded
}
