package main

import (
	"strings"
	"testing"
)

// TestUnknownCommandsExit2: a command line naming no command fails with
// exit 2 and says what the user may have meant, at every level, so that
// a script does not take it for success; a group alone prints its help.
func TestUnknownCommandsExit2(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"session", "delete", "sess_1"}, `unknown command "delete" for "pyexec session"; did you mean "pyexec session rm"?`},
		{[]string{"executions", "get", "exe_1"}, `unknown command "get" for "pyexec executions"; did you mean "pyexec follow"?`},
		{[]string{"env", "bogus"}, `unknown command "bogus" for "pyexec env"; its commands: list, prepare, prune`},
		{[]string{"sesion", "ls"}, `unknown command "sesion" for "pyexec"; did you mean "pyexec session"`},
		{[]string{"bogus"}, `unknown command "bogus" for "pyexec"; its commands: `},
		{[]string{"completion", "tcsh"}, `unknown command "tcsh" for "pyexec completion"`},
		{[]string{"session", "lss"}, `did you mean "pyexec session ls"?`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(tt.args...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, stdout, stderr, tt.want)
			}
		})
	}
	for _, group := range []string{"session", "executions", "env"} {
		if code, stdout, _ := runCLI(group); code != 0 || !strings.Contains(stdout, "Usage:") {
			t.Errorf("pyexec %s: exit %d, stdout %q; want its help", group, code, stdout)
		}
	}
}
