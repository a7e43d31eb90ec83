//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/pyexec/pyexec/internal/config"
)

// startLocal runs a private pyexec in this process for one CLI command:
// the full stack on a temporary data dir, its API on an ephemeral loopback
// port that nothing else knows about. It returns the API's URL and a stop
// function that shuts everything down and removes the data dir.
func startLocal(ctx context.Context, logOut io.Writer) (string, func(), error) {
	dir, err := os.MkdirTemp("", "pyexec-local-")
	if err != nil {
		return "", nil, err
	}
	cfg := config.Default()
	// The environment settings (PYEXEC_RUFF, PYEXEC_INDEX_URL...) apply.
	fs := pflag.NewFlagSet("local", pflag.ContinueOnError)
	cfg.BindEnvironments(fs)
	if err := cfg.Resolve(fs, os.LookupEnv); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	cfg.DataDir = dir
	cfg.Host = "127.0.0.1"
	// A one-shot engine builds only what its request needs.
	cfg.Envs.PrepareBase = false
	// Its data dir is thrown away: fetched tools are kept for the next one.
	if cfg.Envs.ToolsDir == "" {
		if cache, err := os.UserCacheDir(); err == nil {
			cfg.Envs.ToolsDir = filepath.Join(cache, "pyexec", "tools")
		}
	}
	if err := cfg.Validate(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sd := newShutdown(ctx, cfg.ShutdownTimeout, false, log)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- serveOn(sd, ln, cfg, log, ready) }()
	stop := func() {
		sd.start()
		<-done
		sd.release()
		os.RemoveAll(dir)
	}
	select {
	case <-ready:
		return "http://" + ln.Addr().String(), stop, nil
	case err := <-done:
		sd.release()
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("starting the local engine: %w", err)
	}
}
