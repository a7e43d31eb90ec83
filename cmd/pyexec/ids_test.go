package main

import (
	"strings"
	"testing"
)

// An empty id (an unset $SID) is a client error before any request.
func TestEmptyIDsAreClientErrors(t *testing.T) {
	for _, args := range [][]string{
		{"session", "exec", "", "x = 41"},
		{"session", "rm", "ses_1", " "},
		{"follow", ""},
		{"kill", ""},
		{"files", ""},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			api := &fakeAPI{t: t, result: resOK}
			code, _, stderr := runCLI(append(args, "--server", api.start())...)
			if code != exitClientError || !strings.Contains(stderr, "id is empty") {
				t.Errorf("exit %d, stderr %q", code, stderr)
			}
			if reqs := api.requests(); len(reqs) != 0 {
				t.Errorf("requests sent: %+v", reqs)
			}
		})
	}
}
