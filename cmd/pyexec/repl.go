package main

import (
	"bufio"
	"context"
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
			r := &repl{c: o.newClient(), o: o, in: bufio.NewReader(cmd.InOrStdin()), out: cmd.OutOrStdout(),
				errw: cmd.ErrOrStderr(), id: attach}
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
			if isTerminal(r.out) {
				fmt.Fprintf(r.errw, "pyexec session %s (Ctrl-C interrupts a cell, Ctrl-D quits; end a block with an empty line)\n", r.id)
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
--keep or --session, the session.`
	return cmd
}

// repl is one interactive prompt.
type repl struct {
	c         *client.Client
	o         clientOptions
	in        *bufio.Reader
	out, errw io.Writer
	id        string
}

func (r *repl) loop(ctx context.Context) (int, error) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	lines := make(chan string)
	readDone := make(chan error, 1)
	go func() { // owned by loop: it ends at EOF, which loop waits for or abandons with the process
		defer close(lines)
		for {
			line, err := r.in.ReadString('\n')
			if line != "" {
				lines <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				readDone <- err
				return
			}
		}
	}()
	var block []string
	for {
		r.prompt(len(block) > 0)
		select {
		case <-ctx.Done():
			return 0, nil
		case <-sigs:
			if len(block) > 0 {
				fmt.Fprintln(r.errw, "\nKeyboardInterrupt")
			}
			block = nil
			continue
		case line, ok := <-lines:
			if !ok {
				if len(block) > 0 {
					r.run(ctx, strings.Join(block, "\n"), sigs)
				}
				if err := <-readDone; err != io.EOF {
					return exitClientError, err
				}
				return 0, nil
			}
			block = append(block, line)
			if len(block) == 1 && !opensBlock(line) || len(block) > 1 && strings.TrimSpace(line) == "" {
				if code := strings.Join(block, "\n"); strings.TrimSpace(code) != "" {
					if ended := r.run(ctx, code, sigs); ended {
						return 1, fmt.Errorf("the session ended")
					}
				}
				block = nil
			}
		}
	}
}

func (r *repl) prompt(more bool) {
	if !isTerminal(r.out) {
		return
	}
	if more {
		fmt.Fprint(r.out, "... ")
	} else {
		fmt.Fprint(r.out, ">>> ")
	}
}

// run executes one cell; Ctrl-C while it runs interrupts it. It reports
// whether the session ended.
func (r *repl) run(ctx context.Context, code string, sigs <-chan os.Signal) bool {
	type answer struct {
		res *client.CellResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := r.c.ExecuteCell(ctx, r.id, &client.CellRequest{Code: code, TimeoutSeconds: r.o.timeout})
		done <- answer{res, err}
	}()
	for {
		select {
		case <-sigs:
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
