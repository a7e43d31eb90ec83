package main

import (
	"fmt"
	"io"
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
kernel. Sessions live in the memory of the server that created them and end
at their idle timeout, their max lifetime, on rm, or when the server restarts.`,
	}
	cmd.AddCommand(newSessionCreateCmd(), newSessionExecCmd(), newSessionLsCmd(), newSessionRmCmd())
	return cmd
}

// sessionRequest builds a session request from the global flags.
func sessionRequest(o clientOptions, python string, idle int) *client.SessionRequest {
	req := &client.SessionRequest{PythonVersion: python, MemoryMB: o.memory, DiskMB: o.disk, CPUShares: o.cpu,
		IdleTimeoutSeconds: idle}
	if o.network {
		off := false
		req.NetworkDisabled = &off
	}
	return req
}

func newSessionCreateCmd() *cobra.Command {
	var python string
	var idle int
	cmd := newClientCmd("create", "Create a session and print its id", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			s, err := o.newClient().CreateSession(cmd.Context(), sessionRequest(o, python, idle))
			if err != nil {
				return exitClientError, err
			}
			if o.json {
				return 0, printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.SessionID)
			return 0, nil
		})
	cmd.Flags().StringVar(&python, "python", "", "Python version, e.g. 3.12 (default: the server's)")
	cmd.Flags().IntVar(&idle, "idle-timeout", 0, "seconds without a cell before the session ends (default: the server's)")
	return cmd
}

func newSessionExecCmd() *cobra.Command {
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
			r, err := o.newClient().ExecuteCell(cmd.Context(), args[0], &client.CellRequest{Code: code, TimeoutSeconds: o.timeout})
			if err != nil {
				return exitClientError, err
			}
			return printCell(cmd.OutOrStdout(), cmd.ErrOrStderr(), r, o)
		})
	cmd.ValidArgsFunction = completeSessionIDs
	return cmd
}

// printCell prints a cell's output and its value, like a notebook.
func printCell(stdout, stderr io.Writer, r *client.CellResult, o clientOptions) (int, error) {
	code, err := printResult(stdout, stderr, &r.ExecutionResult, o, true)
	if r.SessionEnded && !o.json {
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
	cmd := newClientCmd("rm <session-id>...", "End sessions and remove their files", idArgs("session id", -1, cobra.MinimumNArgs(1)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			c := o.newClient()
			for _, id := range args {
				if err := c.DeleteSession(cmd.Context(), id); err != nil {
					return exitClientError, fmt.Errorf("%s: %w", id, err)
				}
				if !o.quiet && !o.json {
					fmt.Fprintln(cmd.OutOrStdout(), id)
				}
			}
			return 0, nil
		})
	cmd.ValidArgsFunction = completeSessionIDs
	return cmd
}

// completeSessionIDs offers the caller's live sessions.
func completeSessionIDs(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	o, err := readClientOptions(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	list, err := o.newClient().ListSessions(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.SessionID
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}
