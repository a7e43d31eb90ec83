package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

func newExecutionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "executions",
		Short: "Inspect the server's executions",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newExecutionsListCmd())
	return cmd
}

func newExecutionsListCmd() *cobra.Command {
	var (
		status string
		limit  int
		cursor string
	)
	cmd := newClientCmd("list", "List recent executions, most recent first", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			st := client.ExecutionStatus(status)
			if st != "" && st != client.StatusPending && st != client.StatusRunning && !st.Final() {
				return exitClientError, fmt.Errorf("invalid --status %q: want pending, running, completed, failed or killed", status)
			}
			if limit < 0 {
				return exitClientError, fmt.Errorf("--limit must not be negative")
			}
			list, err := o.newClient().ListExecutions(cmd.Context(), client.ListOptions{Status: st, Limit: limit, Cursor: cursor})
			if err != nil {
				return exitClientError, err
			}
			out := cmd.OutOrStdout()
			switch {
			case o.json:
				return 0, printJSON(out, list)
			case o.quiet:
				for _, e := range list.Executions {
					fmt.Fprintln(out, e.ExecutionID)
				}
				return 0, nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "EXECUTION ID\tSTATUS\tEXIT\tDURATION\tCREATED")
			for _, e := range list.Executions {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.ExecutionID, statusWithReason(e), exitColumn(e), durationColumn(e), createdColumn(e))
			}
			if err := tw.Flush(); err != nil {
				return exitClientError, fmt.Errorf("writing list: %w", err)
			}
			if list.Next != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: pyexec executions list --cursor %s\n", list.Next)
			}
			return 0, nil
		})
	fs := cmd.Flags()
	fs.StringVar(&status, "status", "", "only executions in this state (pending, running, completed, failed, killed)")
	fs.IntVar(&limit, "limit", 0, "largest number of executions to list (0 = server default)")
	fs.StringVar(&cursor, "cursor", "", "continue a listing where the previous page ended")
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(
		[]string{"pending", "running", "completed", "failed", "killed"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// statusWithReason is the status, and the reason when it says more
// ("failed (timeout)", but "killed", not "killed (killed)").
func statusWithReason(e client.ExecutionResult) string {
	if e.Reason != "" && e.Reason != string(e.Status) {
		return string(e.Status) + " (" + e.Reason + ")"
	}
	return string(e.Status)
}

func exitColumn(e client.ExecutionResult) string {
	if !e.Status.Final() {
		return "-"
	}
	return strconv.Itoa(e.ExitCode)
}

func durationColumn(e client.ExecutionResult) string {
	if !e.Status.Final() {
		return "-"
	}
	return (time.Duration(e.DurationMs) * time.Millisecond).String()
}

func createdColumn(e client.ExecutionResult) string {
	switch {
	case e.CreatedAt != nil:
		return e.CreatedAt.Local().Format(time.DateTime)
	case e.StartedAt != nil:
		return e.StartedAt.Local().Format(time.DateTime)
	}
	return "-"
}

// completionTimeout bounds the server call behind a shell completion, so
// that an unreachable server does not hang the user's shell.
const completionTimeout = 3 * time.Second

// completeExecutionIDs completes an execution ID argument from the
// server's recent executions (in status, when set).
func completeExecutionIDs(status client.ExecutionStatus) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		o, err := readClientOptions(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		list, err := o.newClient().ListExecutions(ctx, client.ListOptions{Status: status, Limit: 50})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ids := make([]cobra.Completion, 0, len(list.Executions))
		for _, e := range list.Executions {
			ids = append(ids, cobra.CompletionWithDesc(e.ExecutionID, string(e.Status)))
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}
