package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// commands lists the constructors of every subcommand; each lives in its
// own file.
func commands() []func() *cobra.Command {
	return []func() *cobra.Command{
		accepting(newDoctorCmd, flagJSON),
		newVersionCmd,
		newRunCmd,
		newSubmitCmd,
		newFollowCmd,
		newKillCmd,
		newEvalCmd,
		newExecutionsCmd,
		newNodesCmd,
		newFilesCmd,
		newServeCmd,
		newEnvCmd,
		newCACmd,
		newLintCmd,
		newMCPCmd,
		newSessionCmd,
		newSnapshotCmd,
		newReplCmd,
		newWsCmd,
	}
}

// exitStatus carries a subcommand's exit code (and optional error message)
// up to execute, so nothing below main calls os.Exit.
type exitStatus struct {
	code int
	err  error
}

func (e *exitStatus) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("exit status %d", e.code)
}

// Unwrap returns the error the subcommand gave, if any.
func (e *exitStatus) Unwrap() error { return e.err }

// runFunc is the body of a subcommand: it returns the process exit code and
// an error to print (either may be zero).
type runFunc func(cmd *cobra.Command, args []string) (int, error)

// wrap adapts a runFunc to cobra's RunE.
func wrap(f runFunc) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		code, err := f(cmd, args)
		if code == 0 && err == nil {
			return nil
		}
		if code == 0 {
			code = 1
		}
		return &exitStatus{code: code, err: err}
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "pyexec",
		Short:         "Run untrusted Python in a Linux jail, as a service or from the command line",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// The python-executor global flags work before or after the subcommand;
	// the commands that are not clients refuse them and do not show them.
	addClientFlags(root.PersistentFlags())
	root.PersistentPreRunE = rejectClientFlags
	for _, c := range commands() {
		root.AddCommand(c())
	}
	scopeUsage(root)
	return root
}

// execute runs the CLI with args and returns the process exit code.
func execute(args []string, stdout, stderr io.Writer) int {
	return executeWithInput(args, os.Stdin, stdout, stderr)
}

// executeWithInput is execute reading standard input from stdin.
func executeWithInput(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// After SetOut: cobra's completion command keeps the writer it finds.
	refuseUnknownCommands(root)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var st *exitStatus
	if errors.As(err, &st) {
		if st.err != nil {
			fmt.Fprintln(stderr, "Error:", st.err)
		}
		return st.code
	}
	fmt.Fprintln(stderr, "Error:", err)
	return 1
}
