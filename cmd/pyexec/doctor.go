//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/spf13/cobra"
)

func newDoctorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Report which isolation layers this host supports, and why any is missing",
		Long: "doctor inspects the host for every layer of the pyexec jail (namespaces, cgroups, seccomp,\n" +
			"Landlock, user namespaces) and exits non-zero if a required layer is missing, in which case\n" +
			"`pyexec serve` refuses to start unless --unsafe-no-isolation is given.",
		Args: cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) (int, error) {
			checks := sandbox.Probe(sandbox.Config{})
			if asJSON, _ := cmd.Flags().GetBool(flagJSON); asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(checks); err != nil {
					return 1, err
				}
			} else {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				for _, c := range checks {
					mark := "ok"
					switch {
					case !c.OK && c.Required:
						mark = "MISSING"
					case !c.OK:
						mark = "absent"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Layer, mark, c.Detail)
				}
				if err := tw.Flush(); err != nil {
					return 1, err
				}
			}
			for _, c := range checks {
				if c.Required && !c.OK {
					return 1, errors.New("this host cannot isolate payloads: a required layer is missing")
				}
			}
			return 0, nil
		}),
	}
	return cmd
}
