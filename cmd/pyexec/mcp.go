package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/internal/mcpserver"
)

func newMCPCmd() *cobra.Command {
	cmd := newClientCmd("mcp", "Serve pyexec's tools to an AI agent over MCP (stdio)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			srv := mcpserver.New(o.newClient(), mcpserver.Options{Version: buildVersion(), Logger: log})
			t := &mcp.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{cmd.OutOrStdout()}}
			// The session ends when the client closes stdin or on a signal;
			// either is a normal end.
			if err := srv.Run(ctx, t); err != nil && ctx.Err() == nil && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, io.EOF) {
				return 1, err
			}
			return 0, nil
		})
	cmd.Long = `mcp serves pyexec's tools (run_python) to an MCP client such as Claude
Desktop over stdin and stdout, for as long as the client keeps the session
open. The tools run code on the server named by --server (and --api-key),
or with --local on a private engine inside this process. Logs go to stderr;
stdout carries only the protocol. See docs/agents.md.`
	return cmd
}

// nopWriteCloser lets the MCP transport write to stdout without closing it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
