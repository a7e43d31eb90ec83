//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/egress/tlsca"
)

// newCACmd: the egress CA of a data directory, the one the jails trust
// for the destinations whose TLS the egress terminates (secrets, HTTP
// rules): show it, or rotate it.
func newCACmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ca",
		Short: "Show or rotate the egress CA (the one jails trust for the destinations of secrets and HTTP rules)",
		Long: "serve makes the egress CA once, in DATA_DIR/egress-ca, when it starts with --secrets-file. Its key\n" +
			"never leaves the server's process and that directory; jails get its certificate only. The ca\n" +
			"commands read --data-dir (or PYEXEC_DATA_DIR) as serve does.",
	}
	cmd.AddCommand(newCASubCmd("show", "Print the egress CA's file, SHA-256 fingerprint and end",
		func(dir string) (*tlsca.CA, error) {
			ca, err := tlsca.Load(dir)
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("no egress CA in %s: serve makes one at its first start with --secrets-file", dir)
			}
			return ca, err
		}, ""),
		newCASubCmd("rotate", "Replace the egress CA by a new one; a running server keeps the old one until it restarts",
			tlsca.Rotate, "Restart the server: it uses the new CA from its next start, and jails started after that trust it."))
	return cmd
}

// newCASubCmd returns a ca subcommand that gets the CA of the data
// directory with get and prints it, then next (a line, if any).
func newCASubCmd(use, short string, get func(dir string) (*tlsca.CA, error), next string) *cobra.Command {
	cfg := config.Default()
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) (int, error) {
			if err := cfg.Resolve(cmd.Flags(), os.LookupEnv); err != nil {
				return 2, err
			}
			dataDir, err := filepath.Abs(cfg.DataDir)
			if err != nil {
				return 2, fmt.Errorf("data dir: %w", err)
			}
			dir := filepath.Join(dataDir, egressCADir)
			ca, err := get(dir)
			if err != nil {
				return 1, err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "certificate  %s\nsha256       %s\nnot after    %s\n",
				filepath.Join(dir, tlsca.CertFile), ca.Fingerprint(), ca.NotAfter().UTC().Format(time.RFC3339))
			if next != "" {
				fmt.Fprintln(out, next)
			}
			return 0, nil
		}),
	}
	cfg.BindDataDir(cmd.Flags())
	return cmd
}
