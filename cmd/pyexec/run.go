package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

func newRunCmd() *cobra.Command {
	var (
		f          runFlags
		outputsDir string
	)
	cmd := newClientCmd("run [file|dir|x.tar] [-- args...]", "Run Python code on the server and print its output", cobra.ArbitraryArgs,
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			tar, meta, err := buildExecution(cmd, args, &f, o)
			if err != nil {
				return exitClientError, err
			}
			c := o.newClient()
			if o.async {
				id, err := c.ExecuteAsync(cmd.Context(), tar, meta)
				if err != nil {
					return exitClientError, err
				}
				return printID(cmd, id, o)
			}
			if !o.json && isTerminal(cmd.ErrOrStderr()) {
				// On a terminal, follow the execution live: output as it
				// comes, and a spinner while dependencies install.
				return runFollowing(cmd.Context(), c, tar, meta, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			res, err := c.ExecuteSync(cmd.Context(), tar, meta)
			if err != nil {
				return exitClientError, err
			}
			code, err := printResult(cmd.OutOrStdout(), cmd.ErrOrStderr(), res, o, false)
			return finishRich(cmd.Context(), c, cmd.ErrOrStderr(), res, o, outputsDir, code, err)
		})
	cmd.Long = `Upload code, run it and wait for the result. The program's stdout and
stderr are printed on the matching streams, and pyexec exits with its exit
code (124 after a timeout, 137 when it was killed). When stderr is a
terminal, the output is streamed as it is written and a spinner shows the
installation of dependencies; elsewhere the result is printed at the end.

The code is taken, in this order, from --file flags, a .tar archive, a
directory, a single file, or stdin (run as main.py; also with "-" as the
input). Arguments after "--" go to the script. The program's own standard
input is empty unless --stdin names a file, or "-" for pyexec's stdin when
the code comes from a file; it is passed byte for byte, up to 10 MiB.

Rich outputs (plots, tables, display()) and the files the run wrote are
noted on stderr, one line each, unless -q; --outputs-dir saves them, and
"pyexec files ID" lists and downloads the files later.`
	cmd.Example = `  echo 'print("hi")' | pyexec run -q
  pyexec run script.py -e API_KEY -e DEBUG=1 -- --input data.csv
  gzip -c data.csv | pyexec run count.py --stdin -
  pyexec run ./project --entrypoint app.py --requirements requirements.txt
  pyexec run plot.py --collect 'out/*.csv' --outputs-dir results/`
	addWorkspaceFlags(cmd, "the run")
	f.add(cmd)
	cmd.Flags().StringVar(&outputsDir, "outputs-dir", "", "save the run's images (output-N.png) and files (by their paths) in this directory")
	_ = cmd.MarkFlagDirname("outputs-dir")
	return cmd
}

// runFollowing submits the execution and follows it; when the user
// interrupts pyexec, the execution is killed as a synchronous run would be.
func runFollowing(ctx context.Context, c *client.Client, tar []byte, meta *client.Metadata, o clientOptions, stdout, stderr io.Writer) (int, error) {
	id, err := c.ExecuteAsync(ctx, tar, meta)
	if err != nil {
		return exitClientError, err
	}
	code, err := follow(ctx, c, id, o, stdout, stderr)
	if ctx.Err() != nil {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, kerr := c.Kill(kctx, id); kerr != nil {
			fmt.Fprintf(stderr, "killing %s: %v\n", id, kerr)
		}
	}
	return code, err
}

// printID prints the ID of a submitted execution.
func printID(cmd *cobra.Command, id string, o clientOptions) (int, error) {
	if o.json {
		return 0, printJSON(cmd.OutOrStdout(), map[string]string{"execution_id": id})
	}
	fmt.Fprintln(cmd.OutOrStdout(), id)
	return 0, nil
}
