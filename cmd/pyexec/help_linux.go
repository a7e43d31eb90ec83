//go:build linux

package main

import (
	"github.com/spf13/pflag"

	"github.com/pyexec/pyexec/internal/config"
)

// flagSections groups the flags of serve (and of the env commands) by the
// topics of config.FlagGroups; the last section holds the flags of no
// topic (--help).
func flagSections() []flagSection {
	var secs []flagSection
	for _, g := range append(config.FlagGroups(), config.FlagGroup{Title: config.OtherGroup}) {
		secs = append(secs, flagSection{g.Title, func(f *pflag.Flag) bool { return config.GroupOf(f) == g.Title }})
	}
	return append(secs, flagSection{"Other flags", func(f *pflag.Flag) bool { return config.GroupOf(f) == "" }})
}

// environmentOnly lists the PYEXEC_* variables serve reads that no flag
// fills: name and usage.
func environmentOnly() [][2]string {
	var vars [][2]string
	for _, v := range config.EnvironmentOnly() {
		vars = append(vars, [2]string{v.Name, v.Usage})
	}
	return vars
}
