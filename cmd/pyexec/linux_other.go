//go:build !linux

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	return newLinuxOnlyCmd("serve", "Run the HTTP API, the embedded store and the sandboxes")
}

func newDoctorCmd() *cobra.Command {
	return newLinuxOnlyCmd("doctor", "Report which isolation layers this host supports")
}

func newCACmd() *cobra.Command {
	return newLinuxOnlyCmd("ca", "Show or rotate the egress CA")
}

func newEnvCmd() *cobra.Command {
	return newLinuxOnlyCmd("env", "Manage the dependency environments of this host")
}

// startLocal cannot start a private engine: there is no jail off Linux.
func startLocal(context.Context, io.Writer) (string, func(), error) {
	return "", nil, fmt.Errorf("--local %w", errNeedsLinux)
}
