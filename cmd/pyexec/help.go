package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Annotations of the commands.
const (
	// annClient marks the client commands: they take the client flags.
	annClient = "pyexec-client"
	// annAccepts lists, comma separated, the client flags that a command
	// which is not a client reads all the same (doctor --json).
	annAccepts = "pyexec-accepts"
)

// clientFlagNames are the flags addClientFlags defines.
func clientFlagNames() []string {
	return []string{flagServer, flagAPIKey, flagTimeout, flagMemory, flagDisk, flagCPU, flagNetwork, flagSecret, flagImage,
		flagAsync, flagQuiet, flagVerbose, flagJSON, flagLocal}
}

// accepting returns newCmd with the client flags names marked as read by
// the command although it is not a client.
func accepting(newCmd func() *cobra.Command, names ...string) func() *cobra.Command {
	return func() *cobra.Command {
		cmd := newCmd()
		if cmd.Annotations == nil {
			cmd.Annotations = map[string]string{}
		}
		cmd.Annotations[annAccepts] = strings.Join(names, ",")
		return cmd
	}
}

// isClient reports whether cmd is a client command.
func isClient(cmd *cobra.Command) bool {
	_, ok := cmd.Annotations[annClient]
	return ok
}

// acceptedClientFlags returns the client flags cmd reads: all of them for
// a client, those it accepts otherwise.
func acceptedClientFlags(cmd *cobra.Command) []string {
	if isClient(cmd) {
		return clientFlagNames()
	}
	if a := cmd.Annotations[annAccepts]; a != "" {
		return strings.Split(a, ",")
	}
	return nil
}

// rejectClientFlags fails when a client flag was given to a command that
// does not read it (pyexec serve --async): the flags are persistent on the
// root, so that they may come before the subcommand, and would otherwise
// be taken and ignored.
func rejectClientFlags(cmd *cobra.Command, _ []string) error {
	accepted := acceptedClientFlags(cmd)
	for _, name := range clientFlagNames() {
		if cmd.Flags().Changed(name) && !slices.Contains(accepted, name) {
			return fmt.Errorf("--%s is a flag of the client commands (run, eval, session, ...), not of %q", name, cmd.CommandPath())
		}
	}
	return nil
}

// scopeUsage gives every command below root that is not a client a usage
// without the client flags it does not read; serve's flags are grouped by
// topic and followed by the variables without a flag.
func scopeUsage(root *cobra.Command) {
	for _, cmd := range root.Commands() {
		scopeUsage(cmd)
		if !isClient(cmd) {
			cmd.SetUsageFunc(serverUsage)
		}
	}
}

// serverUsage prints the usage of a command that is not a client.
func serverUsage(cmd *cobra.Command) error {
	w := cmd.OutOrStderr()
	fmt.Fprintf(w, "Usage:\n  %s\n", cmd.UseLine())
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(w, "  %s [command]\n", cmd.CommandPath())
	}
	if cmd.HasExample() {
		fmt.Fprintf(w, "\nExamples:\n%s\n", cmd.Example)
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintln(w, "\nCommands:")
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				fmt.Fprintf(w, "  %-*s %s\n", c.NamePadding(), c.Name(), c.Short)
			}
		}
	}
	local := cmd.LocalFlags()
	secs := flagSections()
	grouped := false
	for _, sec := range secs[:len(secs)-1] {
		grouped = printFlagGroup(w, sec.title, local, sec.keep) || grouped
	}
	// The last section holds the flags of no topic: just "Flags" when no
	// topic had any.
	last := secs[len(secs)-1]
	if !grouped {
		last.title = "Flags"
	}
	printFlagGroup(w, last.title, local, last.keep)
	accepted := acceptedClientFlags(cmd)
	printFlagGroup(w, "Global Flags", cmd.InheritedFlags(), func(f *pflag.Flag) bool { return slices.Contains(accepted, f.Name) })
	if vars := environmentOnly(); grouped && len(vars) > 0 {
		fmt.Fprintln(w, "\nEnvironment variables without a flag:")
		width := 0
		for _, v := range vars {
			width = max(width, len(v[0]))
		}
		for _, v := range vars {
			fmt.Fprintf(w, "      %-*s   %s\n", width, v[0], v[1])
		}
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\nUse \"%s [command] --help\" for more information about a command.\n", cmd.CommandPath())
	}
	return nil
}

// flagSection is one titled part of the flags in a usage; the last one
// of flagSections takes the flags of no topic.
type flagSection struct {
	title string
	keep  func(*pflag.Flag) bool
}

// printFlagGroup prints the flags of fs that keep selects under title and
// reports whether there were any.
func printFlagGroup(w io.Writer, title string, fs *pflag.FlagSet, keep func(*pflag.Flag) bool) bool {
	sub := pflag.NewFlagSet(title, pflag.ContinueOnError)
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && keep(f) {
			sub.AddFlag(f)
		}
	})
	if !sub.HasFlags() {
		return false
	}
	fmt.Fprintf(w, "\n%s:\n%s", title, sub.FlagUsagesWrapped(120))
	return true
}
