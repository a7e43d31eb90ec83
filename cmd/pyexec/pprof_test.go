//go:build linux

package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestProfilingIsOffUnlessAskedAndOnlyOnLoopback: without
// PYEXEC_PPROF_ADDR nothing is served; a non-loopback address is refused
// with the reason; a loopback one serves the profile index until stopped.
func TestProfilingIsOffUnlessAskedAndOnlyOnLoopback(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Setenv(pprofEnv, "")
	stop, err := startProfiling(log)
	if err != nil {
		t.Fatalf("unset: %v", err)
	}
	stop()

	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "10.1.2.3:6060", "example.com:6060"} {
		t.Setenv(pprofEnv, addr)
		if stop, err := startProfiling(log); err == nil || !strings.Contains(err.Error(), "loopback") {
			if err == nil {
				stop()
			}
			t.Errorf("%s: err %v, want a refusal naming loopback", addr, err)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t.Setenv(pprofEnv, addr)
	stop, err = startProfiling(log)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("profile index: HTTP %d %.200s", resp.StatusCode, body)
	}
	stop()
	if _, err := http.Get("http://" + addr + "/debug/pprof/"); err == nil {
		t.Error("still served after stop")
	}
}
