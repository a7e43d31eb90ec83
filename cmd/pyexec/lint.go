package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/spf13/cobra"
)

func newLintCmd() *cobra.Command {
	var ruff string
	cmd := &cobra.Command{
		Use:   "lint FILE|-",
		Short: "Check a Python file with ruff (inside the jail) and print the diagnostics as JSON",
		Long: "lint runs ruff with every rule except COM812, CPY, D100, D203, D213, FBT and RUF029, in a jail\n" +
			"without network, and prints [{\"code\",\"message\",\"location\",\"end_location\",\"fix\"}]. It exits 1 when\n" +
			"there are diagnostics. ruff is found with --ruff, $PYEXEC_RUFF or on $PATH.",
		Args: cobra.ExactArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) (int, error) {
			name, data, err := readLintInput(args[0], cmd.InOrStdin())
			if err != nil {
				return 2, err
			}
			if ruff == "" {
				ruff = os.Getenv("PYEXEC_RUFF")
			}
			run, err := sandbox.New(sandbox.Config{})
			if err != nil {
				return 2, err
			}
			l, err := pyenv.NewLinter(run, pyenv.LintConfig{Ruff: ruff})
			if err != nil {
				return 2, err
			}
			diags, err := l.Lint(cmd.Context(), []pyenv.File{{Path: name, Data: data}})
			if err != nil {
				return 2, err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if err := enc.Encode(diags); err != nil {
				return 2, err
			}
			if len(diags) > 0 {
				return 1, nil
			}
			return 0, nil
		}),
	}
	cmd.Flags().StringVar(&ruff, "ruff", "", "the ruff binary")
	return cmd
}

// readLintInput reads the file to lint; "-" is standard input, linted as
// main.py.
func readLintInput(arg string, stdin io.Reader) (string, []byte, error) {
	if arg == "-" {
		b, err := io.ReadAll(stdin)
		return "main.py", b, err
	}
	b, err := os.ReadFile(arg)
	if err != nil {
		return "", nil, fmt.Errorf("reading %s: %w", arg, err)
	}
	return filepath.Base(arg), b, nil
}
