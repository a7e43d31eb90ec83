package runner

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestForkServerProgramComesOnStdin: a fork server's command line is a
// short boot program that runs what its standard input carries before the
// NUL with what follows as the driver, and fails with a reason when its
// standard input carries no program; neither source is on the command line
// (whose copies every fork of the server would map).
func TestForkServerProgramComesOnStdin(t *testing.T) {
	cases := []struct {
		name, stdin, wantOut, wantErr string
		wantCode                      int
	}{
		{name: "program and driver", stdin: "import sys\nprint(repr(_DRIVER), sys.argv[1:])\n\x00the driver",
			wantOut: "'the driver' ['--lean', 'numpy']\n"},
		{name: "nothing", stdin: "", wantErr: "no program on standard input", wantCode: 1},
		{name: "no driver", stdin: "print('ran')\n", wantErr: "no program on standard input", wantCode: 1},
	}
	forEachPython(t, func(t *testing.T, python string) {
		argv := LeanForkServerArgv(python, []string{"numpy"})
		size := 0
		for _, a := range argv {
			size += len(a)
			if strings.Contains(a, "def _serve") || strings.Contains(a, "def _main") {
				t.Fatalf("a source is on the command line: %.80q", a)
			}
		}
		if size > 1<<10 {
			t.Fatalf("the command line is %d bytes", size)
		}
		for _, c := range cases {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Stdin = strings.NewReader(c.stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if code != c.wantCode || stdout.String() != c.wantOut || !strings.Contains(stderr.String(), c.wantErr) {
				t.Errorf("%s: exit %d, stdout %q, stderr %q", c.name, code, stdout.String(), stderr.String())
			}
		}
	})
}
