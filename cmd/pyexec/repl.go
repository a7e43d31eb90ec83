package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

func newReplCmd() *cobra.Command {
	var attach string
	var keep bool
	var f sessionFlags
	cmd := newClientCmd("repl", "An interactive Python prompt against a session", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, os.Interrupt)
			defer signal.Stop(sigs)
			in, err := newLineSource(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), sigs)
			if err != nil {
				return exitClientError, err
			}
			defer in.close()
			r := &repl{c: o.newClient(), o: o, in: in, out: cmd.OutOrStdout(), errw: cmd.ErrOrStderr(), id: attach, sigs: sigs}
			ctx := cmd.Context()
			if r.id == "" {
				s, err := createSession(ctx, r.c, o, f, r.errw)
				if err != nil {
					return exitClientError, err
				}
				r.id = s.SessionID
				if !keep {
					defer func() {
						if err := r.c.DeleteSession(context.WithoutCancel(ctx), r.id); err != nil {
							fmt.Fprintf(r.errw, "pyexec: ending session %s: %v\n", r.id, err)
						}
					}()
				}
			}
			if in.interactive() {
				hist := "no history"
				if f := in.historyFile(); f != "" {
					hist = "history in " + f
				}
				fmt.Fprintf(r.errw, "pyexec session %s (Ctrl-C interrupts a cell, Ctrl-D quits; end a block with an empty line; %s)\n", r.id, hist)
			}
			return r.loop(ctx)
		})
	f.add(cmd, "a new session")
	cmd.Flags().StringVar(&attach, "session", "", "use this existing session instead of creating one (it is kept)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the new session when the prompt ends")
	cmd.Long = `Read Python from stdin a cell at a time and run it in a session, printing
its output and the value of its last expression. A line that opens a block
(ending in ':' or '\', or with brackets left open) reads more lines until an
empty one. Ctrl-C interrupts the running cell (the session keeps its
variables) or drops a half-typed block; Ctrl-D ends the prompt and, unless
--keep or --session, the session.

On a terminal the prompt has line editing and a history (up and down
arrows, Ctrl-R to search) kept per user on this machine, never in the
session: $XDG_STATE_HOME/pyexec/repl_history, by default
~/.local/state/pyexec/repl_history (on macOS and Windows under the user's
configuration directory).`
	return cmd
}

// repl is one interactive prompt.
type repl struct {
	c         *client.Client
	o         clientOptions
	in        lineSource
	out, errw io.Writer
	id        string
	sigs      <-chan os.Signal // Ctrl-C while a cell runs
}

func (r *repl) loop(ctx context.Context) (int, error) {
	var block []string
	for ctx.Err() == nil {
		prompt := ">>> "
		if len(block) > 0 {
			prompt = "... "
		}
		line, err := r.in.readLine(prompt)
		switch {
		case errors.Is(err, errInterrupted):
			if len(block) > 0 || line != "" {
				fmt.Fprintln(r.errw, "KeyboardInterrupt")
			}
			block = nil
			continue
		case errors.Is(err, io.EOF):
			if len(block) > 0 {
				r.run(ctx, strings.Join(block, "\n"))
			}
			return 0, nil
		case err != nil:
			return exitClientError, err
		}
		block = append(block, line)
		if len(block) == 1 && !opensBlock(line) || len(block) > 1 && strings.TrimSpace(line) == "" {
			if code := strings.Join(block, "\n"); strings.TrimSpace(code) != "" {
				if ended := r.run(ctx, code); ended {
					return 1, fmt.Errorf("the session ended")
				}
			}
			block = nil
		}
	}
	return 0, nil
}

// run executes one cell; Ctrl-C while it runs interrupts it. It reports
// whether the session ended.
func (r *repl) run(ctx context.Context, code string) bool {
	type answer struct {
		res *client.CellResult
		err error
	}
	// A Ctrl-C from before the cell started is not meant for it.
	for len(r.sigs) > 0 {
		<-r.sigs
	}
	done := make(chan answer, 1)
	go func() {
		res, err := r.c.ExecuteCell(ctx, r.id, &client.CellRequest{Code: code, TimeoutSeconds: r.o.timeout})
		done <- answer{res, err}
	}()
	for {
		select {
		case <-r.sigs:
			if err := r.c.InterruptSession(ctx, r.id); err != nil {
				fmt.Fprintf(r.errw, "pyexec: interrupting: %v\n", err)
			}
		case a := <-done:
			if a.err != nil {
				fmt.Fprintf(r.errw, "pyexec: %v\n", a.err)
				return false
			}
			o := r.o
			o.verbose = false
			_, _ = printCell(r.out, r.errw, a.res, o)
			return a.res.SessionEnded
		}
	}
}

// opensBlock reports whether line starts a multi-line block: a compound
// statement header, a continuation, or brackets left open.
func opensBlock(line string) bool {
	t := strings.TrimSpace(line)
	if strings.HasSuffix(t, ":") || strings.HasSuffix(t, "\\") || strings.HasPrefix(t, "@") {
		return true
	}
	depth := 0
	for _, c := range t {
		switch c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		}
	}
	return depth > 0 || strings.Count(t, `"""`)%2 == 1 || strings.Count(t, `'''`)%2 == 1
}
