package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// exitUsage is the exit status of a command line pyexec does not
// understand (an unknown command), as with a shell's builtins.
const exitUsage = 2

// otherNames are the words users type for a command, by its path:
// "did you mean" offers the command for them.
func otherNames() map[string][]string {
	return map[string][]string{
		"pyexec follow":          {"get", "show", "wait", "logs", "result"},
		"pyexec kill":            {"stop", "cancel"},
		"pyexec executions list": {"ls"},
		"pyexec session ls":      {"list"},
		"pyexec session rm":      {"delete", "remove", "del", "kill", "stop", "end"},
		"pyexec session exec":    {"run", "eval"},
		"pyexec session create":  {"new", "start"},
		"pyexec env list":        {"ls"},
		"pyexec env prune":       {"rm", "delete", "clean"},
	}
}

// refuseUnknownCommands makes root and every command below it that only
// groups others (session, env, executions, completion) fail with exit 2
// and "unknown command … did you mean …" when its argument names none of
// its commands, instead of printing its help and exiting 0 as if a
// script's command had worked. Without an argument they print their help.
func refuseUnknownCommands(root *cobra.Command) {
	// cobra adds these on Execute; added now, they are walked too. The
	// completion command writes where root writes when it is added.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	names := otherNames()
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		cmd.SuggestFor = append(cmd.SuggestFor, names[cmd.CommandPath()]...)
		for _, c := range cmd.Commands() {
			walk(c)
		}
		if !cmd.HasSubCommands() || cmd.Runnable() {
			return
		}
		cmd.Args = cobra.ArbitraryArgs
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default for the root
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return &exitStatus{code: exitUsage, err: unknownCommand(cmd, args[0])}
		}
	}
	walk(root)
}

// unknownCommand says that name is none of cmd's commands, and which
// one the user may have meant: one of cmd's by spelling or by another
// name, else any command of pyexec known by that name, else cmd's list.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	var meant []string
	for _, s := range cmd.SuggestionsFor(name) {
		meant = append(meant, cmd.CommandPath()+" "+s)
	}
	if len(meant) == 0 {
		meant = knownAs(cmd.Root(), name)
	}
	if len(meant) > 0 {
		for i, m := range meant {
			meant[i] = fmt.Sprintf("%q", m)
		}
		return fmt.Errorf("%s; did you mean %s?", msg, strings.Join(meant, " or "))
	}
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return errors.New(msg + "; its commands: " + strings.Join(names, ", ") + " (see " + cmd.CommandPath() + " --help)")
}

// knownAs lists the commands below cmd that name is another name of.
func knownAs(cmd *cobra.Command, name string) []string {
	var out []string
	for _, c := range cmd.Commands() {
		for _, other := range c.SuggestFor {
			if strings.EqualFold(other, name) {
				out = append(out, c.CommandPath())
			}
		}
		out = append(out, knownAs(c, name)...)
	}
	return out
}
