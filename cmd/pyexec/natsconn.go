//go:build linux

package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pyexec/pyexec/internal/api"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/store"
)

// natsConns are the store's two connections (see store.FollowersOn),
// to the embedded server or to an external cluster.
type natsConns interface {
	Conn() *nats.Conn
	FollowConn() *nats.Conn
	Status() store.NATSStatus
	Close() error
}

// connectStore starts the embedded NATS server, or connects to the cluster
// --nats names, waiting for one of its servers to answer (see
// store.ConnectCluster).
func connectStore(ctx context.Context, cfg config.Config, log *slog.Logger, waiting store.WaitFunc) (natsConns, error) {
	if !cfg.Cluster.External() {
		return store.StartEmbedded(ctx, cfg.DataDir, log)
	}
	cl := cfg.Cluster
	c, err := store.ConnectCluster(ctx, store.ClusterOptions{
		URLs: cl.URLs(), Creds: cl.Creds, TLSCA: cl.TLSCA, TLSCert: cl.TLSCert, TLSKey: cl.TLSKey,
		Node: cl.NodeName, Logger: log.With("component", "nats"), OnWait: waiting,
	})
	if err != nil {
		return nil, err
	}
	log.Info("connected to the NATS cluster", "server", c.Status().Server, "node", cl.NodeName, "replicas", cl.StoreReplicas())
	return c, nil
}

// sessionEntryGrace keeps a session's registry entry that long past the
// longest session life, so that clients of a session that ended with its
// node learn why.
const sessionEntryGrace = time.Hour

// storeConfig is the store's configuration: on a cluster, every asset is
// replicated and a job a node took comes back to the others sooner when
// that node dies.
func storeConfig(cfg config.Config) store.Config {
	sc := store.Config{TTL: cfg.RecordTTL, Replicas: cfg.Cluster.StoreReplicas(),
		SessionTTL: cfg.Sessions.MaxLifetime + sessionEntryGrace}
	if cfg.Cluster.External() {
		sc.AckWait = config.ClusterAckWait
	}
	return sc
}

// natsHealth is the NATS part of /health.
func (s *stack) natsHealth() api.NATSHealth {
	st := s.nats.Status()
	return api.NATSHealth{Mode: st.Mode, Connected: st.Connected, Server: st.Server}
}

// natsCheckTimeout bounds doctor's connection to the cluster.
const natsCheckTimeout = 10 * time.Second

// natsCheck connects to the cluster --nats names, as serve would, and
// asks JetStream for the account's limits.
func natsCheck(ctx context.Context, cfg config.Config) doctorCheck {
	ctx, cancel := context.WithTimeout(ctx, natsCheckTimeout)
	defer cancel()
	fix := "check --nats, the credentials and TLS files, and that the cluster runs with JetStream (docs/fleet.md)"
	cl := cfg.Cluster
	c, err := store.ConnectCluster(ctx, store.ClusterOptions{
		URLs: cl.URLs(), Creds: cl.Creds, TLSCA: cl.TLSCA, TLSCert: cl.TLSCert, TLSKey: cl.TLSKey, Node: cl.NodeName,
	})
	if err != nil {
		return doctorCheck{Layer: "nats", Required: true, Detail: err.Error(), Fix: fix}
	}
	defer c.Close()
	js, err := jetstream.New(c.Conn())
	if err == nil {
		_, err = js.AccountInfo(ctx)
	}
	if err != nil {
		return doctorCheck{Layer: "nats", Required: true, Detail: "connected to " + c.Status().Server + ", but JetStream does not answer: " + err.Error(), Fix: fix}
	}
	mp := c.Conn().MaxPayload()
	switch {
	case mp < store.MinMaxPayload:
		return doctorCheck{Layer: "nats", Required: true,
			Detail: fmt.Sprintf("%s allows messages of %d bytes; the store needs at least %d", c.Status().Server, mp, store.MinMaxPayload),
			Fix:    "set max_payload to 1MB (NATS's default) or more, 8MB for the fastest large outputs (docs/store.md)"}
	case mp < store.EmbeddedMaxPayload:
		return doctorCheck{Layer: "nats", OK: true, Required: true,
			Detail: fmt.Sprintf("%s answers with JetStream (max_payload %d: records and events larger than that go through the object store, a little slower; 8MB avoids it, docs/store.md)",
				c.Status().Server, mp)}
	}
	return doctorCheck{Layer: "nats", OK: true, Required: true,
		Detail: fmt.Sprintf("%s answers with JetStream (max_payload %d)", c.Status().Server, mp)}
}
