package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
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
			c := o.newClient()
			srv := mcpserver.New(c, mcpserver.Options{Version: buildVersion(), Logger: log, Lint: func() bool { return serverLints(ctx, c) },
				Preview: func() bool { return serverPreviews(ctx, c) }})
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

// serverLints asks the server whether it can lint (now or once ruff is
// fetched). A server that does not say, or does not answer in time, is
// taken to lint: its lint calls then answer for themselves.
func serverLints(ctx context.Context, c *client.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h, err := c.Health(ctx)
	return err != nil || h.Tools == nil || h.Tools.Lint != "unavailable"
}

// serverPreviews asks the server whether it shares preview URLs. One that
// does not say, or does not answer in time, is taken not to: its
// preview_session_port would only answer 501.
func serverPreviews(ctx context.Context, c *client.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h, err := c.Health(ctx)
	return err == nil && h.Previews
}
