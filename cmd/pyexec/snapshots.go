package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

// addFromSnapshot defines session create's --from-snapshot on cmd.
func (f *sessionFlags) addFromSnapshot(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.fromSnapshot, "from-snapshot", "",
		"restore this snapshot (from session snapshot) into the new session: its variables, files and configuration")
}

// printSkipped names on w, unless quiet, the variables a snapshot, restore
// or fork left out, each with why.
func printSkipped(w io.Writer, o clientOptions, skipped []client.SkippedVariable) {
	if o.quiet {
		return
	}
	for _, s := range skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.Name, s.Reason)
	}
}

func newSessionSnapshotCmd() *cobra.Command {
	cmd := newClientCmd("snapshot <session-id>", "Save a session's variables and files as a snapshot and print its id",
		idArgs("session id", 1, cobra.ExactArgs(1)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			s, err := o.newClient().Snapshot(cmd.Context(), args[0])
			if err != nil {
				return exitClientError, err
			}
			if o.json {
				return 0, printJSON(cmd.OutOrStdout(), s)
			}
			printSkipped(cmd.ErrOrStderr(), o, s.Skipped)
			fmt.Fprintln(cmd.OutOrStdout(), s.SnapshotID)
			return 0, nil
		})
	cmd.Long = `Save the session's variables, imported modules, functions and classes and its
workspace files into the server's store, as a snapshot of your API key, and print
its id. The session goes on unchanged. A variable that cannot be saved (a thread,
an open file or socket, a generator) is left out and named on stderr.

Restore it later, on any server of the fleet, with
  pyexec session create --from-snapshot SNAPSHOT_ID
List and delete snapshots with pyexec snapshot ls and pyexec snapshot rm.`
	cmd.ValidArgsFunction = completeSessionIDs
	return cmd
}

func newSessionForkCmd() *cobra.Command {
	cmd := newClientCmd("fork <session-id>", "Start a new session holding a copy of a session's state and print its id",
		idArgs("session id", 1, cobra.ExactArgs(1)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			s, err := o.newClient().Fork(cmd.Context(), args[0])
			if err != nil {
				return exitClientError, err
			}
			if o.json {
				return 0, printJSON(cmd.OutOrStdout(), s)
			}
			printSkipped(cmd.ErrOrStderr(), o, s.Skipped)
			fmt.Fprintln(cmd.OutOrStdout(), s.SessionID)
			return 0, nil
		})
	cmd.Long = `Start a new session with the same configuration, in a new jail, holding a copy of
the session's variables and workspace files, and print its id. From then on the
two diverge: a change in one is not seen in the other.`
	cmd.ValidArgsFunction = completeSessionIDs
	return cmd
}

func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Snapshots of sessions: list and delete them",
		Long: `A snapshot holds a session's variables and workspace files; it belongs to the
API key whose session it was made of and is kept until it is deleted. Make one with
pyexec session snapshot ID, restore it with pyexec session create --from-snapshot.`,
	}
	cmd.AddCommand(newSnapshotLsCmd(), newSnapshotRmCmd())
	return cmd
}

func newSnapshotLsCmd() *cobra.Command {
	return newClientCmd("ls", "List your snapshots, oldest first", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			list, err := o.newClient().ListSnapshots(cmd.Context())
			if err != nil {
				return exitClientError, err
			}
			return printList(cmd.OutOrStdout(), o, list, list, func(s client.SnapshotInfo) string { return s.SnapshotID },
				"SNAPSHOT\tSESSION\tPYTHON\tCELLS\tSIZE\tSKIPPED\tAGE", func(s client.SnapshotInfo) string {
					return fmt.Sprintf("%s\t%s\t%s\t%d\t%.1f MiB\t%d\t%s", s.SnapshotID, s.SessionID, s.PythonVersion, s.ExecutionCount,
						float64(s.Bytes)/(1<<20), len(s.Skipped), time.Since(s.CreatedAt).Round(time.Second))
				})
		})
}

func newSnapshotRmCmd() *cobra.Command {
	cmd := newRmCmd("rm <snapshot-id>...", "Delete snapshots", "snapshot id", (*client.Client).DeleteSnapshot)
	cmd.ValidArgsFunction = completeSnapshotIDs
	return cmd
}

// completeSnapshotIDs offers the caller's snapshots.
func completeSnapshotIDs(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return completeIDs(cmd, func(c *client.Client, ctx context.Context) ([]string, error) {
		list, err := c.ListSnapshots(ctx)
		ids := make([]string, len(list))
		for i, s := range list {
			ids[i] = s.SnapshotID
		}
		return ids, err
	})
}
