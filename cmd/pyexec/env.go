package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/spf13/cobra"
)

// openEnvs opens the environment cache configured by PYEXEC_ENV_* variables.
func openEnvs() (*pyenv.Environments, error) {
	cfg, err := pyenv.EnvConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	return pyenv.NewEnvironments(cfg)
}

func newEnvCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Manage the dependency environments of this host (list, prepare, prune)",
		Long: "Environments live under $PYEXEC_ENV_DIR (default /var/lib/pyexec/envs); the index and the\n" +
			"base packages come from PYEXEC_INDEX_URL, PYEXEC_EXTRA_INDEX_URLS, PYEXEC_TRUSTED_HOSTS and\n" +
			"PYEXEC_BASE_PACKAGES.",
	}
	cmd.AddCommand(newEnvListCmd(), newEnvPrepareCmd(), newEnvPruneCmd())
	return cmd
}

func newEnvListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List built environments, most recently used first",
		Args:  cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) (int, error) {
			m, err := openEnvs()
			if err != nil {
				return 1, err
			}
			defer m.Close()
			envs, err := m.List()
			if err != nil {
				return 1, err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tPYTHON\tSIZE\tLAST USED\tREQUIREMENTS")
			for _, e := range envs {
				name := fmt.Sprint(e.Requirements)
				if e.Base {
					name = "(base) " + name
				}
				fmt.Fprintf(tw, "%s\t%s\t%.1f MiB\t%s\t%s\n", e.Key, e.Python, float64(e.SizeBytes)/(1<<20), e.LastUsed.Format(time.RFC3339), name)
			}
			return 0, tw.Flush()
		}),
	}
}

func newEnvPrepareCmd() *cobra.Command {
	var version string
	cmd := &cobra.Command{
		Use:   "prepare",
		Short: "Build the base environment (default: numpy, pandas, matplotlib, requests, beautifulsoup4, scipy)",
		Args:  cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) (int, error) {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			pythons, err := pyenv.Discover(ctx, pyenv.OptionsFromEnv(os.Getenv))
			if err != nil {
				return 1, err
			}
			in, err := pythons.Lookup(version)
			if err != nil {
				return 1, err
			}
			m, err := openEnvs()
			if err != nil {
				return 1, err
			}
			defer m.Close()
			env, err := m.PrepareBase(ctx, in, func(line string) { fmt.Fprintln(cmd.ErrOrStderr(), line) })
			if err != nil {
				return 1, err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "base environment %s for Python %s: %s\n", env.Key, env.Python, env.Dir)
			return 0, nil
		}),
	}
	cmd.Flags().StringVar(&version, "python", "", "Python version (default: the default interpreter)")
	return cmd
}

func newEnvPruneCmd() *cobra.Command {
	var all bool
	var maxBytes int64
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove least recently used environments not in use, down to the size cap",
		Args:  cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) (int, error) {
			m, err := openEnvs()
			if err != nil {
				return 1, err
			}
			defer m.Close()
			removed, err := m.Prune(cmd.Context(), pyenv.PruneOptions{All: all, MaxBytes: maxBytes})
			for _, e := range removed {
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s (%s, %.1f MiB)\n", e.Key, e.Python, float64(e.SizeBytes)/(1<<20))
			}
			if err != nil {
				return 1, err
			}
			return 0, nil
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "remove every environment not in use, the base ones included")
	cmd.Flags().Int64Var(&maxBytes, "max-bytes", 0, "size to prune down to (default: PYEXEC_ENV_MAX_BYTES or 20 GiB)")
	return cmd
}
