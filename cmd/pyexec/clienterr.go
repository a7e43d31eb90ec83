package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

// explainErrors wraps a client command's body: the errors a user can
// mend from the command line say how (see explainClientError).
func explainErrors(f runFunc) runFunc {
	return func(cmd *cobra.Command, args []string) (int, error) {
		code, err := f(cmd, args)
		return code, explainClientError(cmd, err)
	}
}

// explainClientError rewrites an error of a client command that the user
// mends with a flag: a refused connection (no server at --server) and an
// API key the server wants or refuses, whose message names HTTP headers.
func explainClientError(cmd *cobra.Command, err error) error {
	var apiErr *client.APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized:
		given, _ := cmd.Flags().GetString(flagAPIKey)
		if given == "" && os.Getenv("PYEXEC_API_KEY") == "" {
			return errors.New("the server needs an API key: give it with --api-key or PYEXEC_API_KEY (HTTP 401)")
		}
		return fmt.Errorf("the server refused the API key given with --api-key or PYEXEC_API_KEY: %s (HTTP 401)", apiErr.Message)
	case errors.Is(err, syscall.ECONNREFUSED):
		server := "the server"
		if o, oerr := readClientOptions(cmd); oerr == nil {
			server = o.server
		}
		return fmt.Errorf("%w\nno server answers at %s: is it running? Start one with `make run` (in pyexec's repository) or `pyexec serve`, or point --server (PYEXEC_SERVER) at yours", err, server)
	}
	return err
}
