//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/internal/config"
)

func newDoctorCmd() *cobra.Command {
	cfg := config.Default()
	var checkIndex bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what `pyexec serve` needs on this host (isolation, Python, uv, ruff, data dir, disk, index) and how to fix what is missing",
		Long: "doctor inspects the host for every layer of the pyexec jail (namespaces, cgroups under\n" +
			"--cgroup-parent, seccomp, Landlock, user namespaces), the Python interpreters (PYEXEC_PYTHONS),\n" +
			"uv and ruff (named, fetched into DATA_DIR/tools or on PATH), whether the data dir is writable\n" +
			"and how much disk is free (there and in --env-dir), with --check-index whether the package\n" +
			"index answers (one HEAD request), and with --nats the NATS cluster. It reads serve's flags and\n" +
			"PYEXEC_* variables for these settings, listed below. It exits non-zero if a required check\n" +
			"fails; for a missing isolation layer `pyexec serve` refuses to start unless\n" +
			"--unsafe-no-isolation is given.",
		Args: cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) (int, error) {
			if err := cfg.Resolve(cmd.Flags(), os.LookupEnv); err != nil {
				return 2, err
			}
			if err := errors.Join(cfg.ValidateIsolation(), cfg.ValidateCluster()); err != nil {
				return 2, err
			}
			checks := append(isolationChecks(cfg), hostChecks(cmd.Context(), cfg, checkIndex)...)
			if cfg.Cluster.External() {
				checks = append(checks, natsCheck(cmd.Context(), cfg))
			}
			if asJSON, _ := cmd.Flags().GetBool(flagJSON); asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(checks); err != nil {
					return 1, err
				}
			} else if err := printChecks(cmd, checks); err != nil {
				return 1, err
			}
			for _, c := range checks {
				if c.Required && !c.OK {
					return 1, errors.New("this host cannot run pyexec serve: a required check failed")
				}
			}
			return 0, nil
		}),
	}
	cfg.BindEnvironments(cmd.Flags())
	cfg.BindIsolation(cmd.Flags())
	cfg.BindCluster(cmd.Flags())
	cmd.Flags().BoolVar(&checkIndex, "check-index", false, "also send one HEAD request to the package index (--index-url) to see whether it is reachable")
	return cmd
}

// printChecks writes one line per check, and under a failed one how to
// fix it.
func printChecks(cmd *cobra.Command, checks []doctorCheck) error {
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	for _, c := range checks {
		mark := "ok"
		switch {
		case c.Skipped:
			mark = "skipped"
		case !c.OK && c.Required:
			mark = "MISSING"
		case !c.OK:
			mark = "absent"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Layer, mark, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
		}
	}
	return tw.Flush()
}
