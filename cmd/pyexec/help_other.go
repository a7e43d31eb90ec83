//go:build !linux

package main

import "github.com/spf13/pflag"

// flagSections is one section off Linux: the commands that are not
// clients have no flags of their own there.
func flagSections() []flagSection {
	return []flagSection{{"Flags", func(*pflag.Flag) bool { return true }}}
}

// environmentOnly is empty off Linux, where nothing serves.
func environmentOnly() [][2]string { return nil }
