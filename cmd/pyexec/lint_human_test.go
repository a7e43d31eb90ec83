//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// TestLintPrintsRuffsFormatOnATerminal: on a terminal lint prints each
// diagnostic as ruff does, with its line of code and carets, and a count;
// --json keeps the JSON there, and a pipe gets JSON as before.
func TestLintPrintsRuffsFormatOnATerminal(t *testing.T) {
	diags := `[{"code":"F401","message":"` + "`os`" + ` imported but unused","location":{"line":1,"column":8},` +
		`"end_location":{"line":1,"column":10},"fix":{"applicability":"safe","edits":[]},"filename":"bad.py"},` +
		`{"code":"F821","message":"Undefined name ` + "`undefined_name`" + `","location":{"line":3,"column":12},` +
		`"end_location":{"line":3,"column":26},"fix":null,"filename":"bad.py"}]`
	script := writeScript(t, "bad.py", "import os\ndef f():\n    return undefined_name\n")
	onTerminal := func(args ...string) (int, string) {
		t.Helper()
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Skipf("no pseudo-terminal: %v", err)
		}
		defer ptmx.Close()
		screen := make(chan string)
		go func() {
			b, _ := io.ReadAll(ptmx) // ends with EIO once the terminal side is closed
			screen <- string(b)
		}()
		api := &fakeAPI{t: t, result: diags}
		var stderr bytes.Buffer
		code := execute(append(args, "--server", api.start()), tty, &stderr)
		tty.Close()
		return code, strings.ReplaceAll(<-screen, "\r\n", "\n")
	}

	code, out := onTerminal("lint", script)
	want := "bad.py:1:8: F401 [*] `os` imported but unused\n" +
		"  |\n1 | import os\n  |        ^^\n" +
		"bad.py:3:12: F821 Undefined name `undefined_name`\n" +
		"  |\n3 |     return undefined_name\n  |            ^^^^^^^^^^^^^^\n" +
		"Found 2 errors.\n[*] 1 fixable with ruff's --fix (run ruff locally to apply it).\n"
	if code != 1 || out != want {
		t.Errorf("exit %d, terminal shows\n%s\nwant\n%s", code, out, want)
	}

	code, out = onTerminal("lint", "--json", script)
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 2 || code != 1 {
		t.Errorf("--json on a terminal: exit %d, %v\n%s", code, err, out)
	}
}
