package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The stand-ins that serve, doctor and env become off Linux answer every
// invocation, whatever its flags, with the same clear refusal.
func TestLinuxOnlyCommandsRefuseClearly(t *testing.T) {
	for _, args := range [][]string{{"serve"}, {"serve", "--port", "9000", "--allow-network"}, {"env", "list"}, {"doctor", "--json"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			root := &cobra.Command{Use: "pyexec", SilenceErrors: true, SilenceUsage: true}
			root.AddCommand(newLinuxOnlyCmd("serve", "serve"), newLinuxOnlyCmd("env", "env"), newLinuxOnlyCmd("doctor", "doctor"))
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(args)
			err := root.Execute()
			var st *exitStatus
			if !errors.As(err, &st) || st.code != 2 || !errors.Is(err, errNeedsLinux) {
				t.Fatalf("error %v, want exit 2 with errNeedsLinux", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "pyexec "+args[0]+" needs Linux") || !strings.Contains(msg, "--server") {
				t.Errorf("message %q does not say the command needs Linux and what to do instead", msg)
			}
		})
	}
}
