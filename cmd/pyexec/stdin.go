package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

// maxProgramInput bounds what --stdin sends: the request holds it whole,
// and the server keeps it with a queued execution. Larger data belongs
// in an uploaded file.
const maxProgramInput = 10 << 20

// errStdinTwice refuses standard input as both the code and the
// program's input.
var errStdinTwice = errors.New("standard input cannot carry both the code and the program's input (--stdin -): give the code as a file or an argument, or the input with --stdin FILE")

// addStdinFlag defines --stdin on cmd, filling dst.
func addStdinFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "stdin", "", "give the program this file on its standard input, byte for byte (- for pyexec's own stdin; at most 10 MiB)")
	_ = cmd.MarkFlagFilename("stdin") // fails only for an unknown flag name
}

// programInput reads the program's standard input that --stdin names: a
// file, or "-" for pyexec's own stdin (not when the code comes from
// there), and sets it on the request's fields.
func programInput(name string, stdin io.Reader, codeFromStdin bool, text, encoding *string) error {
	if name == "" {
		return nil
	}
	r, what := stdin, "standard input"
	if name == "-" {
		if codeFromStdin {
			return errStdinTwice
		}
	} else {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("--stdin: %w", err)
		}
		defer f.Close()
		r, what = f, name
	}
	data, err := io.ReadAll(io.LimitReader(r, maxProgramInput+1))
	if err != nil {
		return fmt.Errorf("--stdin: reading %s: %w", what, err)
	}
	if len(data) > maxProgramInput {
		return fmt.Errorf("--stdin: %s is larger than %s, the most pyexec gives a program on its standard input; upload it as a file (--file) and open it from the program instead",
			what, humanSize(maxProgramInput))
	}
	*text, *encoding = client.StdinText(data)
	return nil
}
