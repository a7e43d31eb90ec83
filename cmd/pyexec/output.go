package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/pyexec/pyexec/client"
)

// Exit statuses beyond the script's own.
const (
	exitClientError = 1   // bad input, unreachable server, API error
	exitTimeout     = 124 // as timeout(1)
	exitKilled      = 137 // 128 + SIGKILL
)

// exitCode maps a finished execution to the CLI's exit status: the
// script's exit code, 124 for a timeout, 137 for a killed execution, and
// never 0 for one that failed or was killed.
func exitCode(r *client.ExecutionResult) int {
	switch {
	case r.Status == client.StatusKilled:
		return exitKilled
	case r.TimedOut || r.Reason == client.ReasonTimeout:
		return exitTimeout
	case r.Status == client.StatusCompleted:
		return processExit(r.ExitCode)
	case r.Status == client.StatusFailed:
		if c := processExit(r.ExitCode); c != 0 {
			return c
		}
		return exitClientError
	}
	return exitClientError // not finished: the caller asked for a final result
}

// processExit turns an exit code as a server reports it into one a process
// can return: 0–255 as is, a negative signal number as 128+signal (as a
// shell does), anything else as 1 so that it never wraps around to 0.
func processExit(code int) int {
	switch {
	case code >= 0 && code <= 255:
		return code
	case code < 0 && code > -128:
		return 128 - code
	}
	return exitClientError
}

// resultError is the error line printed after a result: the server's error,
// or why a failed or killed execution ended when the server gave no text.
func resultError(r *client.ExecutionResult) error {
	switch {
	case r.Error != "":
		return errors.New(r.Error)
	case r.Status == client.StatusKilled:
		return errors.New("execution was killed")
	case r.Status == client.StatusFailed && r.Reason != "":
		return fmt.Errorf("execution failed: %s", r.Reason)
	case r.Status == client.StatusFailed:
		return errors.New("execution failed")
	}
	return nil
}

// printHeader writes the -v header on stderr.
func printHeader(stderr io.Writer, r *client.ExecutionResult) {
	fmt.Fprintf(stderr, "Execution ID: %s\nStatus: %s\nDuration: %dms\n---\n", r.ExecutionID, r.Status, r.DurationMs)
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// printResult writes a finished execution as python-executor's CLI does
// (stdout, stderr, then the error, which the caller prints as "Error: ...")
// and returns the exit status. When withResult is set (eval), the value of
// the last expression follows stdout; with -q it replaces it when present.
func printResult(stdout, stderr io.Writer, r *client.ExecutionResult, o clientOptions, withResult bool) (int, error) {
	code := exitCode(r)
	if o.json {
		return code, printJSON(stdout, r)
	}
	hasResult := withResult && r.Result != nil && *r.Result != ""
	if o.quiet {
		if hasResult {
			fmt.Fprintln(stdout, *r.Result)
		} else {
			io.WriteString(stdout, r.Stdout)
		}
		return code, nil
	}
	if o.verbose {
		printHeader(stderr, r)
	}
	io.WriteString(stdout, r.Stdout)
	if hasResult {
		fmt.Fprintln(stdout, *r.Result)
	}
	io.WriteString(stderr, r.Stderr)
	return code, resultError(r)
}

// printList prints a listing as the options ask: v as JSON (--json), the
// id of each item alone (-q), or a table of header and a row per item
// (tab-separated columns).
func printList[T any](w io.Writer, o clientOptions, v any, list []T, id func(T) string, header string, row func(T) string) (int, error) {
	switch {
	case o.json:
		return 0, printJSON(w, v)
	case o.quiet:
		for _, x := range list {
			fmt.Fprintln(w, id(x))
		}
		return 0, nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, x := range list {
		fmt.Fprintln(tw, row(x))
	}
	return flushTable(tw)
}

// flushTable writes out a table made with tabwriter.
func flushTable(tw *tabwriter.Writer) (int, error) {
	if err := tw.Flush(); err != nil {
		return exitClientError, fmt.Errorf("writing list: %w", err)
	}
	return 0, nil
}
