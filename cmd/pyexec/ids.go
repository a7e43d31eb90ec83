package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

// idArgs adds to check that the first n arguments (all of them when n is
// negative) are non-empty ids: an unset shell variable ("$SID") must be a
// clear error here, not a request to a different endpoint
// (/api/v1/sessions//execute is cleaned to /api/v1/sessions/execute).
func idArgs(what string, n int, check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return err
		}
		for i, a := range args {
			if n >= 0 && i >= n {
				break
			}
			if strings.TrimSpace(a) == "" {
				return fmt.Errorf("the %s is empty (is the shell variable that should hold it set?)", what)
			}
		}
		return nil
	}
}

// newRmCmd is an rm command of ids named what ("session id"): each is
// deleted in turn with del and printed (unless -q or --json); the first
// failure stops it.
func newRmCmd(use, short, what string, del func(c *client.Client, ctx context.Context, id string) error) *cobra.Command {
	return newClientCmd(use, short, idArgs(what, -1, cobra.MinimumNArgs(1)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			c := o.newClient()
			for _, id := range args {
				if err := del(c, cmd.Context(), id); err != nil {
					return exitClientError, fmt.Errorf("%s: %w", id, err)
				}
				if !o.quiet && !o.json {
					fmt.Fprintln(cmd.OutOrStdout(), id)
				}
			}
			return 0, nil
		})
}

// completeIDs offers the ids list gives the caller; nothing when the
// server cannot be asked.
func completeIDs(cmd *cobra.Command, list func(c *client.Client, ctx context.Context) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	o, err := readClientOptions(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ids, err := list(o.newClient(), cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}
