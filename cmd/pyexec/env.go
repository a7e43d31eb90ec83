//go:build linux

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// envFlags are the serve settings the env commands share with serve
// (--data-dir, --env-dir, the index...), so that they find the same
// environments.
type envFlags struct{ cfg config.Config }

// open resolves the flags and PYEXEC_* variables and opens the
// environments.
func (f *envFlags) open(cmd *cobra.Command) (*pyenv.Environments, error) {
	if err := f.cfg.Resolve(cmd.Flags(), os.LookupEnv); err != nil {
		return nil, err
	}
	if err := f.cfg.ValidateEnvironments(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	var jails pyenv.BuildJails
	if f.cfg.Envs.AllowSourceBuilds {
		m, err := sandbox.New(sandbox.Config{CgroupParent: f.cfg.CgroupParent, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("source builds need the jail (see `pyexec doctor`): %w", err)
		}
		jails = m
	}
	return openEnvironments(f.cfg, log, jails)
}

// newEnvSubCmd returns a subcommand with the environment flags.
func newEnvSubCmd(use, short string, run func(cmd *cobra.Command, envs *pyenv.Environments) (int, error)) *cobra.Command {
	f := &envFlags{cfg: config.Default()}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) (int, error) {
			envs, err := f.open(cmd)
			if err != nil {
				return 2, err
			}
			defer envs.Close()
			return run(cmd, envs)
		}),
	}
	f.cfg.BindEnvironments(cmd.Flags())
	return cmd
}

func newEnvCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Manage the dependency environments of this host (list, prepare, prune)",
		Long: "The env commands read the same settings as serve (flags or PYEXEC_* variables): environments\n" +
			"live in --env-dir, by default DATA_DIR/envs, or /var/tmp/pyexec/envs when the data dir is under\n" +
			"/tmp or /work; the index and the base packages come from --index-url, --extra-index-urls,\n" +
			"--trusted-hosts and --base-packages.",
	}
	cmd.AddCommand(newEnvListCmd(), newEnvPrepareCmd(), newEnvPruneCmd())
	return cmd
}

func newEnvListCmd() *cobra.Command {
	return newEnvSubCmd("list", "List built environments, most recently used first",
		func(cmd *cobra.Command, m *pyenv.Environments) (int, error) {
			envs, err := m.List()
			if err != nil {
				return 1, err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tPYTHON\tSIZE\tLAST USED\tREQUIREMENTS")
			for _, e := range envs {
				name := fmt.Sprint(e.Requirements)
				switch {
				case e.Base:
					name = "(base) " + name
				case e.BaseKey != "":
					name = "(layer over " + e.BaseKey + ") " + name
				}
				fmt.Fprintf(tw, "%s\t%s\t%.1f MiB\t%s\t%s\n", e.Key, e.Python, float64(e.SizeBytes)/(1<<20), e.LastUsed.Format(time.RFC3339), name)
			}
			return 0, tw.Flush()
		})
}

func newEnvPrepareCmd() *cobra.Command {
	var version string
	cmd := newEnvSubCmd("prepare", "Build the base environment (default: numpy, pandas, matplotlib, requests, beautifulsoup4, scipy)",
		func(cmd *cobra.Command, m *pyenv.Environments) (int, error) {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			popts := pyenv.OptionsFromEnv(os.Getenv)
			popts.Preferred = defaultPython
			pythons, err := pyenv.Discover(ctx, popts)
			if err != nil {
				return 1, err
			}
			in, err := pythons.Lookup(version)
			if err != nil {
				return 1, err
			}
			env, err := m.PrepareBase(ctx, in, func(line string) { fmt.Fprintln(cmd.ErrOrStderr(), line) })
			if err != nil {
				return 1, err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "base environment %s for Python %s: %s\n", env.Key, env.Python, env.Dir)
			return 0, nil
		})
	cmd.Flags().StringVar(&version, "python", "", "Python version (default: the default interpreter)")
	return cmd
}

func newEnvPruneCmd() *cobra.Command {
	var all bool
	var maxBytes int64
	cmd := newEnvSubCmd("prune", "Remove least recently used environments not in use, down to the size cap",
		func(cmd *cobra.Command, m *pyenv.Environments) (int, error) {
			removed, err := m.Prune(cmd.Context(), pyenv.PruneOptions{All: all, MaxBytes: maxBytes})
			for _, e := range removed {
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s (%s, %.1f MiB)\n", e.Key, e.Python, float64(e.SizeBytes)/(1<<20))
			}
			if err != nil {
				return 1, err
			}
			return 0, nil
		})
	cmd.Flags().BoolVar(&all, "all", false, "remove every environment not in use, the base ones included")
	cmd.Flags().Int64Var(&maxBytes, "max-bytes", 0, "size to prune down to (default: --env-max-bytes)")
	return cmd
}
