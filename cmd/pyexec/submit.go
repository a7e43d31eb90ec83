package main

import (
	"github.com/spf13/cobra"
)

func newSubmitCmd() *cobra.Command {
	var f runFlags
	cmd := newClientCmd("submit [file|dir|x.tar] [-- args...]", "Queue Python code for execution and print its execution ID", cobra.ArbitraryArgs,
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			tar, meta, err := buildExecution(cmd, args, &f, o)
			if err != nil {
				return exitClientError, err
			}
			id, err := o.newClient().ExecuteAsync(cmd.Context(), tar, meta)
			if err != nil {
				return exitClientError, err
			}
			return printID(cmd, id, o)
		})
	cmd.Long = `Upload code and queue it without waiting; the execution ID is printed on
stdout. Watch it with "pyexec follow ID" and stop it with "pyexec kill ID".
Input and flags are those of "pyexec run".`
	cmd.Example = `  id=$(pyexec submit long_task.py)
  pyexec follow "$id"`
	addWorkspaceFlags(cmd, "the run")
	f.add(cmd)
	return cmd
}
