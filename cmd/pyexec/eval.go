package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

func newEvalCmd() *cobra.Command {
	var (
		python     string
		noResult   bool
		outputsDir string
		stdin      string
	)
	cmd := newClientCmd("eval [code]", "Evaluate Python code and print the value of its last expression", cobra.MaximumNArgs(1),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			if o.async {
				return exitClientError, errors.New("eval runs synchronously; use submit for --async")
			}
			if o.image != "" {
				return exitClientError, errors.New("eval chooses the interpreter with --python, not --image")
			}
			req := &client.SimpleExecRequest{Config: o.config(), PythonVersion: python, EvalLastExpr: !noResult}
			codeFromStdin := len(args) == 0 || args[0] == "-"
			if err := programInput(stdin, cmd.InOrStdin(), codeFromStdin, &req.Stdin, &req.StdinEncoding); err != nil {
				return exitClientError, err
			}
			if req.Code, err = evalCode(args, cmd.InOrStdin()); err != nil {
				return exitClientError, err
			}
			c := o.newClient()
			res, err := c.Eval(cmd.Context(), req)
			if err != nil {
				return exitClientError, err
			}
			status, err := printResult(cmd.OutOrStdout(), cmd.ErrOrStderr(), res, o, !noResult)
			return finishRich(cmd.Context(), c, cmd.ErrOrStderr(), res, o, outputsDir, status, err)
		})
	cmd.Long = `Run code given as an argument or on stdin ("-" or no argument). If its
last statement is an expression with a value other than None, that value's
repr is printed after the program's stdout (with -q, instead of it).
--stdin gives the program a file (or, with code as the argument, pyexec's
own stdin) on its standard input.`
	cmd.Example = `  pyexec eval '2 + 2'
  echo 'import sys; sys.version' | pyexec eval --python 3.11
  pyexec eval --no-result 'print("hello"); 42'
  cat data.bin | pyexec eval --stdin - 'import sys; len(sys.stdin.buffer.read())'`
	addWorkspaceFlags(cmd, "the run")
	cmd.Flags().StringVar(&python, "python", "", `Python version, e.g. "3.12" (default: the server's)`)
	cmd.Flags().BoolVar(&noResult, "no-result", false, "do not evaluate the last expression; just run the code")
	cmd.Flags().StringVar(&outputsDir, "outputs-dir", "", "save the images (output-N.png) and files the code produced in this directory")
	addStdinFlag(cmd, &stdin)
	return cmd
}

// evalCode returns the code of eval: the argument, else ("-" or none)
// all of stdin.
func evalCode(args []string, stdin io.Reader) (string, error) {
	if len(args) == 1 && args[0] != "-" {
		if args[0] == "" {
			return "", errors.New("no code given")
		}
		return args[0], nil
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return "", fmt.Errorf("reading stdin: %w", err)
	}
	if len(b) == 0 {
		return "", errors.New("no input: give code as an argument or pipe it on stdin")
	}
	return string(b), nil
}
