package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

func newLintCmd() *cobra.Command {
	var sel, ignore []string
	var profile string
	cmd := newClientCmd("lint FILE|-", "Check a Python file with the server's ruff and print the diagnostics as JSON", cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			name, data, err := readLintInput(args[0], cmd.InOrStdin())
			if err != nil {
				return exitClientError, err
			}
			if len(data) == 0 {
				return exitClientError, errors.New("nothing to lint: the input is empty")
			}
			diags, err := o.newClient().Lint(cmd.Context(), &client.LintRequest{
				Files:   []client.CodeFile{{Name: name, Content: string(data)}},
				Profile: profile,
				Select:  sel,
				Ignore:  ignore,
			})
			if err != nil {
				return exitClientError, err
			}
			if err := printJSON(cmd.OutOrStdout(), diags); err != nil {
				return exitClientError, err
			}
			if len(diags) > 0 {
				return 1, nil
			}
			return 0, nil
		})
	cmd.Long = `lint sends the file to the server (or, with --local, to a private in-process
engine), which runs ruff in a jail without network, and prints the list
[{"code","message","location","end_location","fix","filename"}] as JSON.
The default profile reports likely bugs, not style: pyflakes (F),
pycodestyle's E7 and E9 errors and bugbear (B), without E731 and E741
(the operator may change it); --profile strict checks every rule except
COM812, CPY, D100, D203, D213, FBT and RUF029; --select and --ignore
replace the profile's rules. It exits 1 when there are diagnostics, 0
when the code is clean.`
	cmd.Example = `  pyexec lint script.py
  pyexec lint --profile strict script.py
  cat script.py | pyexec lint - --select E,F`
	cmd.Flags().StringVar(&profile, "profile", "", "rule profile: default (likely bugs only) or strict (nearly every rule)")
	cmd.Flags().StringSliceVar(&sel, "select", nil, "ruff rules to check instead of the profile's selection, comma separated")
	cmd.Flags().StringSliceVar(&ignore, "ignore", nil, "ruff rules to ignore instead of the profile's list, comma separated")
	return cmd
}

// readLintInput reads the file to lint; "-" is standard input, linted as
// main.py.
func readLintInput(arg string, stdin io.Reader) (string, []byte, error) {
	if arg == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return "", nil, fmt.Errorf("reading stdin: %w", err)
		}
		return "main.py", b, nil
	}
	b, err := os.ReadFile(arg)
	if err != nil {
		return "", nil, fmt.Errorf("reading %s: %w", arg, err)
	}
	return filepath.Base(arg), b, nil
}
