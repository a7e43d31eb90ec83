package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

func newSessionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Stateful sessions: variables, imports and files persist between cells",
		Long: `A session is one interpreter in one jail for its whole life, like a notebook
kernel. Sessions live in the memory of the server that holds them (on a fleet any
server reaches them) and end at their idle timeout, their max lifetime or on rm.
A session idle for a while is hibernated (saved, its memory given back) and resumes
at its next call; a graceful restart of the server keeps it. Save one for later
with session snapshot, copy one with session fork.`,
	}
	cmd.AddCommand(newSessionCreateCmd(), newSessionExecCmd(), newSessionLsCmd(), newSessionRmCmd(), newSessionPreviewCmd(),
		newSessionSnapshotCmd(), newSessionForkCmd())
	return cmd
}

// sessionFlags are the flags that shape a new session.
type sessionFlags struct {
	python       string
	idle         int
	requirements []string
	fromSnapshot string
}

// add defines the flags on cmd; what says which session they create.
func (f *sessionFlags) add(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&f.python, "python", "", "Python version of "+what+", e.g. 3.12 (default: the server's)")
	cmd.Flags().IntVar(&f.idle, "idle-timeout", 0, "seconds without a cell before "+what+" ends (default: the server's)")
	cmd.Flags().StringArrayVarP(&f.requirements, "requirements", "r", nil,
		"a requirement installed over the base environment, e.g. -r 'polars>=1' (repeatable), or @FILE for a requirements.txt")
}

// sessionRequest builds a session request from the global flags and f.
func sessionRequest(o clientOptions, f sessionFlags) (*client.SessionRequest, error) {
	reqs, err := requirementsText(f.requirements)
	if err != nil {
		return nil, err
	}
	req := &client.SessionRequest{PythonVersion: f.python, MemoryMB: o.memory, DiskMB: o.disk, CPUShares: o.cpu,
		IdleTimeoutSeconds: f.idle, Requirements: reqs, Workspace: o.workspace, WorkspaceMode: o.workspaceMode,
		FromSnapshot: f.fromSnapshot, Secrets: o.secrets}
	if o.network {
		off := false
		req.NetworkDisabled = &off
	}
	if len(o.allow) > 0 {
		req.Network = &client.NetworkConfig{Allow: o.allow}
	}
	return req, nil
}

// requirementsText joins -r values into a requirements.txt: each is one
// requirement, or @FILE for the lines of a file.
func requirementsText(entries []string) (string, error) {
	var lines []string
	for _, e := range entries {
		if path, ok := strings.CutPrefix(e, "@"); ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("--requirements: %w", err)
			}
			lines = append(lines, strings.TrimRight(string(b), "\n"))
			continue
		}
		e = strings.TrimSpace(e)
		if e == "" || strings.ContainsAny(e, "\r\n") {
			return "", fmt.Errorf("--requirements: %q is not one requirement (give @FILE for a requirements file)", e)
		}
		lines = append(lines, e)
	}
	if len(lines) == 0 {
		return "", nil
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// createSession creates a session of f, showing the installer's progress
// on errw (a spinner on a terminal, install: lines elsewhere, nothing
// with -q) while the server builds its environment.
func createSession(ctx context.Context, c *client.Client, o clientOptions, f sessionFlags, errw io.Writer) (*client.Session, error) {
	req, err := sessionRequest(o, f)
	if err != nil {
		return nil, err
	}
	p := newProgress(errw, o.quiet)
	defer p.Stop()
	p.Note("starting a Python session")
	return c.CreateSessionWithProgress(ctx, req, p.Install)
}

func newSessionCreateCmd() *cobra.Command {
	var f sessionFlags
	cmd := newClientCmd("create", "Create a session and print its id", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			s, err := createSession(cmd.Context(), o.newClient(), o, f, cmd.ErrOrStderr())
			if err != nil {
				return exitClientError, err
			}
			if o.json {
				return 0, printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.SessionID)
			return 0, nil
		})
	f.add(cmd, "the session")
	addWorkspaceFlags(cmd, "the session's life")
	f.addFromSnapshot(cmd)
	return cmd
}

func newSessionExecCmd() *cobra.Command {
	var outputsDir string
	cmd := newClientCmd("exec <session-id> [code|-]", "Run a cell in a session (code from the argument or stdin)", idArgs("session id", 1, cobra.RangeArgs(1, 2)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			code := ""
			if len(args) == 2 && args[1] != "-" {
				code = args[1]
			} else {
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return exitClientError, fmt.Errorf("reading the cell from stdin: %w", err)
				}
				code = string(b)
			}
			c := o.newClient()
			r, err := c.ExecuteCell(cmd.Context(), args[0], &client.CellRequest{Code: code, TimeoutSeconds: o.timeout})
			if err != nil {
				return exitClientError, err
			}
			status, err := printCell(cmd.OutOrStdout(), cmd.ErrOrStderr(), r, o)
			return finishRich(cmd.Context(), c, cmd.ErrOrStderr(), &r.ExecutionResult, o, outputsDir, status, err)
		})
	cmd.Long = `Run code as the session's next cell and print its output and the value of
its last expression, like a notebook. Plots and other rich outputs are
noted on stderr, one line each, unless -q; --outputs-dir saves the images.`
	cmd.Flags().StringVar(&outputsDir, "outputs-dir", "", "save the cell's images (output-N.png) in this directory")
	_ = cmd.MarkFlagDirname("outputs-dir") // fails only for an unknown flag name
	cmd.ValidArgsFunction = completeSessionIDs
	return cmd
}

// printCell prints a cell's output and its value, like a notebook; with
// --json, the whole cell result (its count and session included).
func printCell(stdout, stderr io.Writer, r *client.CellResult, o clientOptions) (int, error) {
	if o.json {
		return exitCode(&r.ExecutionResult), printJSON(stdout, r)
	}
	if r.Resumed && o.verbose {
		fmt.Fprintln(stderr, "pyexec: the session was hibernated; it resumed for this cell")
	}
	code, err := printResult(stdout, stderr, &r.ExecutionResult, o, true)
	if r.SessionEnded {
		fmt.Fprintln(stderr, "pyexec: the session ended")
	}
	return code, err
}

func newSessionLsCmd() *cobra.Command {
	return newClientCmd("ls", "List your live sessions", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			list, err := o.newClient().ListSessions(cmd.Context())
			if err != nil {
				return exitClientError, err
			}
			if o.json {
				return 0, printJSON(cmd.OutOrStdout(), list)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SESSION\tSTATE\tPYTHON\tCELLS\tMEMORY\tIDLE FOR\tEXPIRES IN")
			for _, s := range list {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%.1f MiB\t%s\t%s\n", s.SessionID, s.State, s.PythonVersion, s.ExecutionCount,
					float64(s.MemoryBytes)/(1<<20), time.Since(s.LastActivity).Round(time.Second), time.Until(s.ExpiresAt).Round(time.Second))
			}
			return 0, w.Flush()
		})
}

func newSessionRmCmd() *cobra.Command {
	cmd := newRmCmd("rm <session-id>...", "End sessions and remove their files", "session id", (*client.Client).DeleteSession)
	cmd.ValidArgsFunction = completeSessionIDs
	return cmd
}

// completeSessionIDs offers the caller's live sessions.
func completeSessionIDs(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return completeIDs(cmd, func(c *client.Client, ctx context.Context) ([]string, error) {
		list, err := c.ListSessions(ctx)
		ids := make([]string, len(list))
		for i, s := range list {
			ids[i] = s.SessionID
		}
		return ids, err
	})
}
