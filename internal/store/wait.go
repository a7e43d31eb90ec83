package store

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A node does not give up on NATS while it starts: a fleet's nodes and
// its NATS servers start in any order, and a JetStream cluster answers
// only once a majority of its servers runs and has elected a leader. So
// ConnectCluster and Open retry what fails for a reason that time can
// mend (nothing listens yet, no leader, too few servers for the replicas
// yet, a request that timed out) with the reconnect delays of
// reconnectDelay, and tell their WaitFunc what they wait for; they return
// only on success, on an error that no wait can mend (a server refusing
// our credentials, a single server asked for replicas), or when ctx ends.

// WaitFunc is told of each failed attempt while ConnectCluster or Open
// wait for NATS: what was being done, why it failed, and when the next
// attempt comes.
type WaitFunc func(what string, err error, retryIn time.Duration)

// OnWait makes Open report its failed attempts to f.
func OnWait(f WaitFunc) Option {
	return func(s *NATS) error {
		s.onWait = f
		return nil
	}
}

// attemptTimeout bounds one attempt when ctx has a deadline. Without
// one, JetStream bounds each request itself (5 s); with one, it waits up
// to the deadline, and a request sent before the cluster had a leader
// gets no answer: the attempt would never end while the cluster comes up.
const attemptTimeout = 10 * time.Second

// retry runs fn until it succeeds, fails for good, or ctx ends; what
// names it for wait and in errors.
func retry(ctx context.Context, what string, wait WaitFunc, explain func(error) error, fn func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if _, ok := ctx.Deadline(); ok {
			actx, cancel = context.WithTimeout(ctx, attemptTimeout)
		}
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		err = explain(err)
		if ctx.Err() != nil || permanent(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		d := reconnectDelay(attempt)
		if wait != nil {
			wait(what, err, d)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w (stopped waiting: %w)", what, err, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// permanentError marks an error that waiting cannot mend.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// permanent reports whether err cannot be mended by waiting: the
// connection was closed, the servers refuse this client, or the store
// asks what the server can never give.
func permanent(err error) bool {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var p permanentError
	return errors.As(err, &p) || errors.Is(err, ErrClosed) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, jetstream.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired) ||
		errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// JetStream's error codes that say something about the cluster (the
// server's JSClusterNoPeersErrF, JSInsufficientResourcesErr,
// JSStreamReplicasNotSupportedErr, JSClusterNotAvailErr); nats.go names
// none of them.
const (
	codeNoPeers          = 10005
	codeNoResources      = 10023
	codeReplicasNotInOne = 10074
	codeNotAvailable     = 10008
)

// explainOpen says in an operator's words why creating or binding an
// asset failed, and marks what cannot be mended.
func (s *NATS) explainOpen(err error) error {
	var api *jetstream.APIError
	switch {
	case errors.As(err, &api) && api.ErrorCode == codeReplicasNotInOne:
		return permanentError{fmt.Errorf("the NATS server is not part of a cluster, so it keeps 1 replica only (set --nats-replicas to 1, or add servers to a cluster): %w", err)}
	case errors.As(err, &api) && (api.ErrorCode == codeNoPeers || api.ErrorCode == codeNoResources):
		return fmt.Errorf("the JetStream cluster has fewer servers than the %d replicas asked for, or fewer running (set --nats-replicas to at most its size; waiting for servers to join): %w",
			s.cfg.Replicas, err)
	case errors.As(err, &api) && api.ErrorCode == codeNotAvailable:
		return fmt.Errorf("JetStream is not available yet (the cluster has no leader: too few of its servers run): %w", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("JetStream did not answer in time (a cluster still electing its leader, or without a majority of its servers): %w", err)
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("no JetStream server answered (is JetStream enabled, and do enough servers run?): %w", err)
	case errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrConnectionDraining):
		return fmt.Errorf("not connected to NATS: %w", err)
	}
	return err
}
