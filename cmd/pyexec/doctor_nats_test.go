//go:build linux

package main

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// startNATS starts a single NATS server on loopback; jetStream and
// maxPayload configure it. It returns its client URL.
func startNATS(t *testing.T, jetStream bool, maxPayload int32) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srv, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, JetStream: jetStream,
		StoreDir: t.TempDir(), MaxPayload: maxPayload, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return fmt.Sprintf("nats://127.0.0.1:%d", port)
}

func TestDoctorChecksTheCluster(t *testing.T) {
	tests := []struct {
		name       string
		url        func(t *testing.T) string
		wantOK     bool
		wantErr    string // in the check's detail, with a fix
		wantDetail string // in the check's detail of a passed check
	}{
		{name: "JetStream with 8 MiB messages", url: func(t *testing.T) string { return startNATS(t, true, 8<<20) }, wantOK: true},
		{name: "the default 1 MiB messages", url: func(t *testing.T) string { return startNATS(t, true, 1<<20) }, wantOK: true, wantDetail: "object store"},
		{name: "tiny messages", url: func(t *testing.T) string { return startNATS(t, true, 64<<10) }, wantErr: "the store needs at least"},
		{name: "no JetStream", url: func(t *testing.T) string { return startNATS(t, false, 8<<20) }, wantErr: "JetStream does not answer"},
		{name: "nothing listening", url: func(t *testing.T) string { return "nats://127.0.0.1:1" }, wantErr: "connecting to NATS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checks, _ := doctorJSON(t, "--data-dir", t.TempDir(), "--nats", tt.url(t), "--node-name", "doctor")
			c, ok := checks["nats"]
			if !ok {
				t.Fatal("doctor --nats reported no nats check")
			}
			if c.OK != tt.wantOK || !c.Required || (tt.wantErr != "" && (!strings.Contains(c.Detail, tt.wantErr) || c.Fix == "")) {
				t.Errorf("nats check %+v, want ok=%v and a detail with %q and a fix", c, tt.wantOK, tt.wantErr)
			}
			if !strings.Contains(c.Detail, tt.wantDetail) {
				t.Errorf("nats check %+v, want a detail with %q", c, tt.wantDetail)
			}
		})
	}
	checks, _ := doctorJSON(t, "--data-dir", t.TempDir())
	if _, ok := checks["nats"]; ok {
		t.Error("doctor without --nats checks NATS")
	}
}
