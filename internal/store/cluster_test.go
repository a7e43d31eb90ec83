package store

import (
	"context"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// TestOpenNamesTooFewServers asks a single server for three replicas: no
// wait can mend that, so Open fails at once, saying why and what to set.
func TestOpenNamesTooFewServers(t *testing.T) {
	emb, err := StartEmbedded(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = Open(ctx, emb.Conn(), Config{Replicas: 3})
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "not part of a cluster") || !strings.Contains(err.Error(), "--nats-replicas") {
		t.Fatalf("Open with 3 replicas on one server = %v, want an error at once naming the missing cluster and --nats-replicas", err)
	}
}

func TestConnectClusterFailsWithoutServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := ConnectCluster(ctx, ClusterOptions{URLs: []string{"nats://127.0.0.1:1"}, Node: "a"})
	if err == nil || !strings.Contains(err.Error(), "nats://127.0.0.1:1") {
		t.Fatalf("ConnectCluster to a closed port = %v, want an error naming the URL", err)
	}
}

func TestReconnectDelayBacksOff(t *testing.T) {
	prev := time.Duration(0)
	for n := 1; n <= 10; n++ {
		d := reconnectDelay(n)
		if d < minReconnectDelay || d > maxReconnectDelay+maxReconnectDelay/4 {
			t.Fatalf("attempt %d waits %v, outside %v..%v", n, d, minReconnectDelay, maxReconnectDelay*5/4)
		}
		if base := min(minReconnectDelay<<(n-1), maxReconnectDelay); d < base || d < prev*3/4 {
			t.Errorf("attempt %d waits %v, want at least %v (previous %v)", n, d, base, prev)
		}
		prev = d
	}
}

// TestStatusHidesURLCredentials connects with a token and with a user and
// password in the URL, as NATS allows: /health, open without an API key,
// shows Status().Server, so neither may appear there, nor in the error of
// a connection that fails.
func TestStatusHidesURLCredentials(t *testing.T) {
	srv, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
		Authorization: "s3cr3t-token"})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	addr := srv.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ConnectCluster(ctx, ClusterOptions{URLs: []string{"nats://s3cr3t-token@" + addr}, Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Status().Server; strings.Contains(got, "s3cr3t") || !strings.Contains(got, addr) {
		t.Fatalf("Status().Server = %q, want %s without the token", got, addr)
	}

	_, err = ConnectCluster(ctx, ClusterOptions{URLs: []string{"nats://bob:pa55word@" + addr}, Node: "b"})
	if err == nil || strings.Contains(err.Error(), "pa55word") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("a refused connection = %v, want an error naming %s without the password", err, addr)
	}
}
