package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

// newSessionPreviewCmd prints a preview URL of a port a session serves,
// or revokes that port's URLs.
func newSessionPreviewCmd() *cobra.Command {
	var revoke bool
	cmd := newClientCmd("preview <session-id> <port>", "Print a preview URL of the web app a session serves on a port",
		idArgs("session id", 1, cobra.ExactArgs(2)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			// The server reads the port strictly; a local check names it first.
			port, err := strconv.Atoi(args[1])
			if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != args[1] {
				return exitClientError, fmt.Errorf("invalid port %q: want a decimal number from 1 to 65535", args[1])
			}
			c := o.newClient()
			if revoke {
				n, err := c.RevokeSessionPort(cmd.Context(), args[0], port)
				if err != nil {
					return exitClientError, err
				}
				if o.json {
					return 0, printJSON(cmd.OutOrStdout(), map[string]int{"revoked": n})
				}
				if !o.quiet {
					fmt.Fprintf(cmd.OutOrStdout(), "revoked %d preview URL(s)\n", n)
				}
				return 0, nil
			}
			s, err := c.ShareSessionPort(cmd.Context(), args[0], port)
			if err != nil {
				return exitClientError, err
			}
			if o.json {
				return 0, printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.URL)
			return 0, nil
		})
	cmd.Long = "Prints a URL that opens, in a browser and without the API key, the web app the session serves on\n" +
		"PORT inside its jail (Streamlit, Gradio, FastAPI...), until it expires (the server's --preview-ttl),\n" +
		"is revoked (--revoke) or the session ends. The server must run with --preview."
	cmd.Flags().BoolVar(&revoke, "revoke", false, "revoke every preview URL of this port instead")
	cmd.ValidArgsFunction = completeSessionIDs
	return cmd
}
