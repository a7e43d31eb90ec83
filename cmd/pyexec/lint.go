package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

func newLintCmd() *cobra.Command {
	var sel, ignore []string
	var profile string
	cmd := newClientCmd("lint FILE|-", "Check a Python file with the server's ruff and print its diagnostics", cobra.ExactArgs(1),
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
			out := cmd.OutOrStdout()
			if o.json || !isTerminal(out) {
				err = printJSON(out, diags)
			} else {
				err = printDiagnostics(out, diags, data)
			}
			if err != nil {
				return exitClientError, err
			}
			if len(diags) > 0 {
				return 1, nil
			}
			return 0, nil
		})
	cmd.Long = `lint sends the file to the server (or, with --local, to a private in-process
engine), which runs ruff in a jail without network. On a terminal it prints
the diagnostics as ruff does, each with its line of code; otherwise, and
with --json, it prints the list
[{"code","message","location","end_location","fix","filename"}] as JSON.
pyexec's own display() is known to the linter. The default profile reports likely bugs, not style: pyflakes (F),
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

// printDiagnostics writes diags as ruff writes them for a person: one
// "file:line:col: CODE message" line each ([*] when ruff has a fix),
// the line of src it points at with carets under the range, then a count.
func printDiagnostics(w io.Writer, diags []client.Diagnostic, src []byte) error {
	bw := bufio.NewWriter(w)
	lines := strings.Split(string(src), "\n")
	fixable := 0
	for _, d := range diags {
		mark := ""
		if len(d.Fix) > 0 && string(d.Fix) != "null" {
			mark = "[*] "
			fixable++
		}
		fmt.Fprintf(bw, "%s:%d:%d: %s %s%s\n", d.Filename, d.Location.Line, d.Location.Column, d.Code, mark, d.Message)
		if n := d.Location.Line; n >= 1 && n <= len(lines) {
			writeCodeFrame(bw, n, lines[n-1], d)
		}
	}
	switch len(diags) {
	case 0:
		fmt.Fprintln(bw, "All checks passed!")
	case 1:
		fmt.Fprintln(bw, "Found 1 error.")
	default:
		fmt.Fprintf(bw, "Found %d errors.\n", len(diags))
	}
	if fixable > 0 {
		fmt.Fprintf(bw, "[*] %d fixable with ruff's --fix (run ruff locally to apply it).\n", fixable)
	}
	return bw.Flush()
}

// writeCodeFrame writes line n of the source with carets under the part
// of it d covers (to its end when d goes on to later lines).
func writeCodeFrame(w io.Writer, n int, line string, d client.Diagnostic) {
	text := []rune(strings.TrimRight(line, "\r"))
	from := min(max(d.Location.Column-1, 0), len(text))
	to := len(text)
	if d.EndLocation.Line == n {
		to = min(max(d.EndLocation.Column-1, from), len(text))
	}
	gutter := strconv.Itoa(n)
	pad := strings.Repeat(" ", len(gutter))
	// Tabs keep their width under the code: the carets' indent copies them.
	indent := strings.Map(func(r rune) rune {
		if r == '\t' {
			return r
		}
		return ' '
	}, string(text[:from]))
	fmt.Fprintf(w, "%s |\n%s | %s\n%s | %s%s\n", pad, gutter, string(text), pad, indent, strings.Repeat("^", max(to-from, 1)))
}
