package main

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sentStdin decodes the stdin a request carried: its text, or the bytes
// of its base64 with stdin_encoding base64.
func sentStdin(t *testing.T, fields map[string]any) []byte {
	t.Helper()
	text, _ := fields["stdin"].(string)
	switch enc, _ := fields["stdin_encoding"].(string); enc {
	case "":
		return []byte(text)
	case "base64":
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			t.Fatalf("stdin is not base64: %v", err)
		}
		return b
	default:
		t.Fatalf("stdin_encoding %q", enc)
	}
	return nil
}

// runCLIWithStdin is runCLI with pyexec's own standard input.
func runCLIWithStdin(stdin []byte, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := executeWithInput(args, bytes.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestStdinIsForwardedByteForByte: --stdin gives the program a file or
// pyexec's own stdin exactly, text or binary, through run, submit and
// eval; stdin stays the code when no file is given, and "-" says so.
func TestStdinIsForwardedByteForByte(t *testing.T) {
	binary := []byte{0x00, 0xff, 0xfe, 'a', '\n', 0x80, 0xc3, 0x28, '\r', '\n'}
	text := []byte("line one\nnaïve ☃\n")
	dir := t.TempDir()
	binFile := filepath.Join(dir, "data.bin")
	if err := os.WriteFile(binFile, binary, 0o644); err != nil {
		t.Fatal(err)
	}
	script := writeScript(t, "rd.py", "import sys\nprint(sys.stdin.buffer.read())\n")
	tests := []struct {
		name      string
		args      []string
		stdin     []byte
		want      []byte
		wantFiles []string // what the archive held (run, submit)
		wantCode  string   // the code sent (eval)
	}{
		{name: "run with a binary file", args: []string{"run", script, "--stdin", binFile}, want: binary, wantFiles: []string{"rd.py"}},
		{name: "run with pyexec's stdin", args: []string{"run", script, "--stdin", "-"}, stdin: binary, want: binary, wantFiles: []string{"rd.py"}},
		{name: "run with text", args: []string{"run", "--stdin", "-", script}, stdin: text, want: text, wantFiles: []string{"rd.py"}},
		{name: "submit", args: []string{"submit", script, "--stdin", binFile}, want: binary, wantFiles: []string{"rd.py"}},
		{name: "code from stdin, input from a file", args: []string{"run", "-", "--stdin", binFile}, stdin: []byte("print(1)\n"), want: binary, wantFiles: []string{"main.py"}},
		{name: "code from stdin without a file", args: []string{"run"}, stdin: []byte("print(2)\n"), want: []byte{}, wantFiles: []string{"main.py"}},
		{name: "eval", args: []string{"eval", "--stdin", "-", "import sys; sys.stdin.read()"}, stdin: binary, want: binary, wantCode: "import sys; sys.stdin.read()"},
		{name: "eval code from stdin", args: []string{"eval", "-", "--stdin", binFile}, stdin: []byte("2+2"), want: binary, wantCode: "2+2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{t: t, result: resOK}
			code, _, stderr := runCLIWithStdin(tt.stdin, append(tt.args, "--server", api.start())...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			reqs := api.requests()
			if len(reqs) == 0 {
				t.Fatal("no request")
			}
			fields := reqs[0].metadata
			if tt.wantCode != "" {
				fields = reqs[0].body
				if fields["code"] != tt.wantCode {
					t.Errorf("code %q, want %q", fields["code"], tt.wantCode)
				}
			} else if strings.Join(reqs[0].files, ",") != strings.Join(tt.wantFiles, ",") {
				t.Errorf("files %v, want %v", reqs[0].files, tt.wantFiles)
			}
			if got := sentStdin(t, fields); !bytes.Equal(got, tt.want) {
				t.Errorf("the program gets %q on stdin, want %q", got, tt.want)
			}
		})
	}
}

func TestStdinErrors(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, make([]byte, maxProgramInput+1), 0o644); err != nil {
		t.Fatal(err)
	}
	script := writeScript(t, "rd.py", "")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"stdin as code and as input", []string{"run", "--stdin", "-"}, "cannot carry both"},
		{"run - with --stdin -", []string{"run", "-", "--stdin", "-"}, "cannot carry both"},
		{"eval from stdin with --stdin -", []string{"eval", "--stdin", "-"}, "cannot carry both"},
		{"too large", []string{"run", script, "--stdin", big}, "larger than 10.0 MiB"},
		{"missing file", []string{"run", script, "--stdin", big + ".nope"}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{t: t, result: resOK}
			code, _, stderr := runCLIWithStdin([]byte("print(1)"), append(tt.args, "--server", api.start())...)
			if code != exitClientError || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, tt.want)
			}
			if n := len(api.requests()); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}
