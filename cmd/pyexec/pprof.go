//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"
)

// pprofEnv names the variable that turns on Go's profiling endpoints
// (/debug/pprof/ on a listener of their own) for measuring the server:
// unset, nothing is served. It takes a loopback address only, since the
// profiles expose the server's internals, and is meant for development,
// not for production.
const pprofEnv = "PYEXEC_PPROF_ADDR"

// startProfiling serves /debug/pprof/ on the address in PYEXEC_PPROF_ADDR
// until the returned function is called; with the variable unset it does
// nothing.
func startProfiling(log *slog.Logger) (stop func(), err error) {
	addr, ok := os.LookupEnv(pprofEnv)
	if !ok || addr == "" {
		return func() {}, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pprofEnv, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, errors.New(pprofEnv + " must be a loopback address (e.g. 127.0.0.1:6060): profiles expose the server's internals")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pprofEnv, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Warn("serving Go profiles (development only)", "addr", ln.Addr().String(), "variable", pprofEnv)
	return func() { _ = srv.Close() }, nil
}
