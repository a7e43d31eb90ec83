package api

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/internal/config"
)

// TestMCPSessionDoesNotHoldShutdown: a connected MCP client keeps a stream
// open; shutting the server down ends it instead of waiting for the
// shutdown timeout.
func TestMCPSessionDoesNotHoldShutdown(t *testing.T) {
	s, err := New(newFakeEngine(), Options{Config: config.Default(), Version: "test", ShutdownTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()

	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the client open its standalone stream

	start := time.Now()
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("shutdown took %v", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("shutdown waited for the MCP session")
	}
}
