package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/client"
)

// tarNames lists the file names in a tar archive.
func tarNames(t *testing.T, data []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			slices.Sort(names)
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
}

func TestReadInputPrecedence(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	script := write("script.py", "print(1)")
	helper := write("helper.py", "X = 1")
	noext := write("tool", "print(2)")
	write("proj/app.py", "")
	write("proj/lib/util.py", "")
	archive, err := client.TarFromMap(map[string]string{"in_tar.py": ""})
	if err != nil {
		t.Fatal(err)
	}
	tarPath := write("code.tar", string(archive))

	tests := []struct {
		name       string
		positional []string
		files      []string
		stdin      string
		wantFiles  []string
		wantEntry  string
		wantErr    string
	}{
		{name: "--file flags", files: []string{script, helper}, stdin: "ignored", wantFiles: []string{"helper.py", "script.py"}},
		{name: ".tar as is", positional: []string{tarPath}, stdin: "ignored", wantFiles: []string{"in_tar.py"}},
		{name: "directory", positional: []string{filepath.Join(dir, "proj")}, wantFiles: []string{"app.py", "lib/util.py"}},
		{name: "single file is the entrypoint", positional: []string{noext}, wantFiles: []string{"tool"}, wantEntry: "tool"},
		{name: "stdin as main.py", stdin: "print('hi')", wantFiles: []string{"main.py"}, wantEntry: "main.py"},
		{name: "--file with a positional input", positional: []string{script}, files: []string{helper}, wantErr: "cannot be combined"},
		{name: "two positional inputs", positional: []string{script, helper}, wantErr: "expected one file"},
		{name: "empty stdin", wantErr: "no input"},
		{name: "missing path", positional: []string{filepath.Join(dir, "nope.py")}, wantErr: "no such file"},
		{name: "missing .tar", positional: []string{filepath.Join(dir, "nope.tar")}, wantErr: "reading archive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := readInput(tt.positional, tt.files, strings.NewReader(tt.stdin))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tarNames(t, in.tar); !reflect.DeepEqual(got, tt.wantFiles) {
				t.Errorf("files = %v, want %v", got, tt.wantFiles)
			}
			if in.entrypoint != tt.wantEntry {
				t.Errorf("entrypoint = %q, want %q", in.entrypoint, tt.wantEntry)
			}
		})
	}
}

func TestResolveEnv(t *testing.T) {
	local := map[string]string{"HOME_DIR": "/home/u", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := local[k]; return v, ok }
	tests := []struct {
		name    string
		specs   []string
		want    []string
		wantErr string
	}{
		{name: "explicit values", specs: []string{"A=1", "B=x=y", "C="}, want: []string{"A=1", "B=x=y", "C="}},
		{name: "bare name copies the local value", specs: []string{"HOME_DIR", "EMPTY"}, want: []string{"HOME_DIR=/home/u", "EMPTY="}},
		{name: "unset local variable", specs: []string{"A=1", "MISSING"}, wantErr: "MISSING is not set"},
		{name: "no name", specs: []string{"=value"}, wantErr: "invalid environment variable"},
		{name: "space in name", specs: []string{"A B=1"}, wantErr: "invalid environment variable"},
		{name: "none", specs: nil, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveEnv(tt.specs, lookup)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("resolveEnv = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		r    client.ExecutionResult
		want int
	}{
		{"success", client.ExecutionResult{Status: client.StatusCompleted}, 0},
		{"script exit code", client.ExecutionResult{Status: client.StatusCompleted, ExitCode: 3}, 3},
		{"python exception", client.ExecutionResult{Status: client.StatusCompleted, ExitCode: 1, ErrorType: "NameError"}, 1},
		{"killed by a signal", client.ExecutionResult{Status: client.StatusCompleted, ExitCode: -9}, 137},
		{"out of range never wraps to 0", client.ExecutionResult{Status: client.StatusCompleted, ExitCode: 256}, 1},
		{"timeout by reason", client.ExecutionResult{Status: client.StatusFailed, ExitCode: 137, Reason: client.ReasonTimeout}, 124},
		{"timeout by flag", client.ExecutionResult{Status: client.StatusFailed, ExitCode: -1, TimedOut: true}, 124},
		{"killed", client.ExecutionResult{Status: client.StatusKilled, ExitCode: 0}, 137},
		{"failed with exit code 0", client.ExecutionResult{Status: client.StatusFailed, Error: "setup failed"}, 1},
		{"failed with an exit code", client.ExecutionResult{Status: client.StatusFailed, ExitCode: 137, Reason: client.ReasonOOM}, 137},
		{"not finished", client.ExecutionResult{Status: client.StatusRunning}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitCode(&tt.r); got != tt.want {
				t.Errorf("exitCode = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestEvalCode(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		stdin   string
		want    string
		wantErr bool
	}{
		{name: "argument", args: []string{"2+2"}, stdin: "ignored", want: "2+2"},
		{name: "stdin", stdin: "x = 1\nx\n", want: "x = 1\nx\n"},
		{name: "nothing", wantErr: true},
		{name: "empty argument", args: []string{""}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := evalCode(tt.args, strings.NewReader(tt.stdin))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("evalCode = %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
