package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

// finalPoll is how often follow asks for the final record when the event
// stream said the execution ended before the record shows it.
const finalPoll = 200 * time.Millisecond

// legacyPoll is the polling interval against servers without live events.
const legacyPoll = time.Second

func newFollowCmd() *cobra.Command {
	cmd := newClientCmd("follow <execution-id>", "Stream an execution's output live until it ends", idArgs("execution id", 1, cobra.ExactArgs(1)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			return follow(cmd.Context(), o.newClient(), args[0], o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Long = `Print an execution's stdout and stderr as they are written, then exit
with its exit code. For an execution that already ended, its output is
replayed from the start. With --json, nothing is streamed: the final result
is printed as JSON.`
	cmd.ValidArgsFunction = completeExecutionIDs("")
	return cmd
}

// follow streams execution id to stdout and stderr and returns the exit
// status of its final result.
func follow(ctx context.Context, c *client.Client, id string, o clientOptions, stdout, stderr io.Writer) (int, error) {
	if o.verbose && !o.json {
		fmt.Fprintf(stderr, "Execution ID: %s\n---\n", id)
	}
	streamed := false
	prog := newProgress(stderr, o.quiet || o.json)
	defer prog.Stop()
	for ev, err := range c.Follow(ctx, id) {
		if err != nil {
			if !streamed && eventsUnsupported(err) {
				// A python-executor server has no event stream: poll,
				// and print the whole result at the end.
				res, err := c.WaitForCompletion(ctx, id, legacyPoll)
				if err != nil {
					return exitClientError, err
				}
				o.verbose = false
				return printResult(stdout, stderr, res, o, false)
			}
			return exitClientError, err
		}
		streamed = true
		if o.json {
			continue
		}
		switch ev.Type {
		case client.EventInstall:
			prog.Install(ev.Data)
			continue
		case client.EventStatus:
			// pending → running says nothing to print: the spinner
			// keeps turning until the program writes something.
			continue
		}
		prog.Stop()
		switch ev.Type {
		case client.EventStdout:
			io.WriteString(stdout, ev.Data)
		case client.EventStderr:
			if !o.quiet {
				io.WriteString(stderr, ev.Data)
			}
		case client.EventDisplay:
			if out, err := ev.Output(); err == nil && !o.quiet {
				if note := outputNote(out); note != "" {
					fmt.Fprintln(stderr, note)
				}
			}
		}
	}
	prog.Stop()
	res, err := c.WaitForCompletion(ctx, id, finalPoll)
	if err != nil {
		return exitClientError, err
	}
	code := exitCode(res)
	switch {
	case o.json:
		return code, printJSON(stdout, res)
	case o.quiet:
		return code, nil
	case o.verbose:
		fmt.Fprintf(stderr, "---\nStatus: %s\nDuration: %dms\n", res.Status, res.DurationMs)
	}
	fileNotes(stderr, res)
	return code, resultError(res)
}

// eventsUnsupported reports whether err says the server has no event
// stream at all (as opposed to not knowing the execution).
func eventsUnsupported(err error) bool {
	var ae *client.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.StatusCode {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return true
	}
	return false
}
