package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
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
