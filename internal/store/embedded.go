package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedMaxPayload is the largest message the embedded server accepts.
// 8 MiB is the highest value nats-server accepts without warning; large
// request payloads go to the object store, which chunks them.
const EmbeddedMaxPayload = 8 << 20

// Embedded is an in-process NATS server with JetStream file storage and no
// network listener, plus two in-process client connections to it: one for
// the store and one for event followers (see FollowersOn).
type Embedded struct {
	srv    *server.Server
	nc     *nats.Conn
	follow *nats.Conn
	closed chan struct{} // closed once nc is closed
	stop   chan struct{} // closed by Close: ends returnMemory
}

// StartEmbedded starts a NATS server that keeps its JetStream data under
// dataDir/nats and connects to it in process. The server listens on no
// port, so nothing outside this process can reach it. ctx bounds the
// start-up only.
func StartEmbedded(ctx context.Context, dataDir string, logger *slog.Logger) (*Embedded, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if dataDir == "" {
		return nil, errors.New("store: empty data directory")
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("store: resolving data directory: %w", err)
	}
	opts := &server.Options{
		ServerName: "pyexec",
		DontListen: true,
		JetStream:  true,
		StoreDir:   filepath.Join(abs, "nats"),
		MaxPayload: EmbeddedMaxPayload,
		NoSigs:     true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("store: creating embedded NATS server: %w", err)
	}
	srv.SetLoggerV2(natsLogger{logger.With("component", "nats")}, false, false, false)
	go srv.Start() // Start returns once the server runs; Shutdown ends it.

	wait := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	if !srv.ReadyForConnections(wait) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("store: embedded NATS server did not become ready")
	}
	closed := make(chan struct{})
	nc, err := nats.Connect("", nats.InProcessServer(srv), nats.Name("pyexec"),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("store: connecting to embedded NATS server: %w", err)
	}
	follow, err := nats.Connect("", nats.InProcessServer(srv), nats.Name("pyexec-followers"))
	if err != nil {
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("store: connecting followers to embedded NATS server: %w", err)
	}
	stop := make(chan struct{})
	go returnMemory(memoryCheckEvery, stop)
	return &Embedded{srv: srv, nc: nc, follow: follow, closed: closed, stop: stop}, nil
}

// Conn is the in-process client connection. It stays valid until Close.
func (e *Embedded) Conn() *nats.Conn { return e.nc }

// FollowConn is the in-process connection for event followers, to pass to
// FollowersOn. It stays valid until Close.
func (e *Embedded) FollowConn() *nats.Conn { return e.follow }

// Close drains the connection, shuts the server down and waits until its
// files are closed, so the data directory can be reopened right away.
func (e *Embedded) Close() error {
	close(e.stop)
	// Followers only read: nothing of theirs needs draining.
	e.follow.Close()
	err := e.nc.Drain()
	if err == nil {
		// Drain is asynchronous and ends by closing the connection; it
		// gives up by itself after the client's drain timeout.
		<-e.closed
	}
	e.nc.Close()
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	if err != nil {
		return fmt.Errorf("store: draining NATS connection: %w", err)
	}
	return nil
}

// natsLogger sends the server's log lines to slog. Its notices (the
// start-up banner, the JetStream settings) are debug lines: at info they
// would bury pyexec's own start-up lines under fifteen of NATS's.
type natsLogger struct{ l *slog.Logger }

func (n natsLogger) Noticef(format string, v ...any) { n.l.Debug(fmt.Sprintf(format, v...)) }
func (n natsLogger) Warnf(format string, v ...any)   { n.l.Warn(fmt.Sprintf(format, v...)) }
func (n natsLogger) Fatalf(format string, v ...any)  { n.l.Error(fmt.Sprintf(format, v...)) }
func (n natsLogger) Errorf(format string, v ...any)  { n.l.Error(fmt.Sprintf(format, v...)) }
func (n natsLogger) Debugf(format string, v ...any)  { n.l.Debug(fmt.Sprintf(format, v...)) }
func (n natsLogger) Tracef(format string, v ...any)  { n.l.Debug(fmt.Sprintf(format, v...)) }

// Status reports the in-process connection.
func (e *Embedded) Status() NATSStatus {
	return NATSStatus{Mode: ModeEmbedded, Connected: e.nc.IsConnected()}
}
