package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

func newFilesCmd() *cobra.Command {
	var out string
	cmd := newClientCmd("files <execution-id> [path]", "List or download the files an execution produced", idArgs("execution id", 1, cobra.RangeArgs(1, 2)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			c := o.newClient()
			if len(args) == 1 {
				if out != "" {
					return exitClientError, fmt.Errorf("-o needs a file path to download; to save every file use \"pyexec run --outputs-dir\"")
				}
				return listFiles(cmd.Context(), c, args[0], o, cmd.OutOrStdout())
			}
			return 0, downloadFile(cmd.Context(), c, args[0], args[1], out, cmd.OutOrStdout())
		})
	cmd.Long = `Without a path, list the files an execution wrote (path, size, type,
SHA-256). With a path, download that file: to stdout, or with -o to a file.`
	cmd.Example = `  pyexec files exe_3f1c…
  pyexec files exe_3f1c… out/report.csv -o report.csv
  pyexec files exe_3f1c… chart.png > chart.png`
	cmd.Flags().StringVarP(&out, "output", "o", "", `write the file here instead of stdout ("-" is stdout)`)
	cmd.ValidArgsFunction = completeExecutionIDs("")
	return cmd
}

// listFiles prints the files of execution id as a table (paths only with
// -q, the list with --json).
func listFiles(ctx context.Context, c *client.Client, id string, o clientOptions, w io.Writer) (int, error) {
	files, err := c.ListFiles(ctx, id)
	if err != nil {
		return exitClientError, err
	}
	return printList(w, o, files, files, func(f client.FileInfo) string { return f.Path }, "PATH\tSIZE\tTYPE\tSHA256",
		func(f client.FileInfo) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s", f.Path, humanSize(f.Size), f.MIME, f.SHA256)
		})
}

// downloadFile copies one file of execution id to the file out, or to
// stdout when out is "" or "-". A partly written file is removed.
func downloadFile(ctx context.Context, c *client.Client, id, path, out string, stdout io.Writer) error {
	rc, err := c.DownloadFile(ctx, id, path)
	if err != nil {
		return err
	}
	defer rc.Close()
	return saveTo(rc, out, stdout, path)
}

// saveTo copies r to the file out, or to stdout when out is "" or "-"; a
// partly written file is removed. what names r in errors.
func saveTo(r io.Reader, out string, stdout io.Writer, what string) (err error) {
	if out == "" || out == "-" {
		if _, err := io.Copy(stdout, r); err != nil {
			return fmt.Errorf("downloading %s: %w", what, err)
		}
		return nil
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(out)
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		return fmt.Errorf("downloading %s: %w", what, err)
	}
	return nil
}
