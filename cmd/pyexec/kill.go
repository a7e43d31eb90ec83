package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

func newKillCmd() *cobra.Command {
	cmd := newClientCmd("kill <execution-id>", "Kill a running execution", idArgs("execution id", 1, cobra.ExactArgs(1)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			id := args[0]
			status, err := o.newClient().Kill(cmd.Context(), id)
			if err != nil {
				return exitClientError, err
			}
			switch {
			case o.json:
				return 0, printJSON(cmd.OutOrStdout(), map[string]string{"execution_id": id, "status": string(status)})
			case o.quiet:
			case status == client.StatusKilled:
				fmt.Fprintln(cmd.OutOrStdout(), "Execution killed")
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "Execution %s was not running (status: %s)\n", id, status)
			}
			return 0, nil
		})
	cmd.Long = `Kill every process of an execution. Its output so far is kept and its
status becomes killed. Killing an execution that already ended changes
nothing and says so.`
	cmd.ValidArgsFunction = completeExecutionIDs(client.StatusRunning)
	return cmd
}
