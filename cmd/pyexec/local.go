package main

import "github.com/spf13/cobra"

const flagLocal = "local"

// withLocal wraps a client command's body: with --local it first starts a
// private in-process pyexec and points --server at it.
func withLocal(f runFunc) runFunc {
	return func(cmd *cobra.Command, args []string) (int, error) {
		local, err := cmd.Flags().GetBool(flagLocal)
		if err != nil || !local {
			return f(cmd, args)
		}
		url, stop, err := startLocal(cmd.Context(), cmd.ErrOrStderr())
		if err != nil {
			return 1, err
		}
		defer stop()
		if err := cmd.Flags().Set(flagServer, url); err != nil {
			return 1, err
		}
		return f(cmd, args)
	}
}
