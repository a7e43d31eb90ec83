// Command pyexec runs untrusted Python in a Linux jail: as a service
// (serve), as a client of one (run, eval, submit, ...), and as the jail's
// own init (the hidden sandbox-init). See README.md.
package main

import (
	"os"

	"github.com/pyexec/pyexec/internal/sandbox"
)

func main() {
	// The jail's init is dispatched before anything else, as runc does with
	// "runc init": it must not parse flags or start goroutines of the CLI.
	if sandbox.IsInit() {
		os.Exit(sandbox.Init())
	}
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}
