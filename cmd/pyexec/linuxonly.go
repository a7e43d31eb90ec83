package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// errNeedsLinux is why the commands that build jails do nothing here: off
// Linux the binary is a client of a pyexec server only.
var errNeedsLinux = fmt.Errorf("needs Linux (this pyexec is built for %s, where it is a client only: point --server or $PYEXEC_SERVER at a pyexec server on Linux)", runtime.GOOS)

// newLinuxOnlyCmd returns a command that says it needs Linux, whatever its
// flags and arguments (they are not parsed, so the answer is the same).
func newLinuxOnlyCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short + " (Linux only)",
		DisableFlagParsing: true,
		RunE: wrap(func(cmd *cobra.Command, _ []string) (int, error) {
			return 2, fmt.Errorf("pyexec %s %w", cmd.Name(), errNeedsLinux)
		}),
	}
}
