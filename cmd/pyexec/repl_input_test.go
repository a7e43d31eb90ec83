package main

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestHistoryPath(t *testing.T) {
	home := func() (string, error) { return "/home/ada", nil }
	config := func() (string, error) { return "/home/ada/Library/Application Support", nil }
	noHome := func() (string, error) { return "", errors.New("$HOME is not defined") }
	tests := []struct {
		name  string
		env   map[string]string
		home  func() (string, error)
		want  string
		isErr bool
	}{
		{"XDG_STATE_HOME wins", map[string]string{"XDG_STATE_HOME": "/state"}, home, "/state/pyexec/repl_history", false},
		{"a relative XDG_STATE_HOME is ignored", map[string]string{"XDG_STATE_HOME": "state"}, home, "/home/ada/.local/state/pyexec/repl_history", false},
		{"the default state directory", nil, home, "/home/ada/.local/state/pyexec/repl_history", false},
		{"no home, no history", nil, noHome, "", true},
	}
	if runtime.GOOS != "linux" {
		t.Skip("the defaults below are Linux's")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := historyPath(func(k string) string { return tt.env[k] }, tt.home, config)
			if got != tt.want || (err != nil) != tt.isErr {
				t.Errorf("got %q, %v; want %q (error %v)", got, err, tt.want, tt.isErr)
			}
		})
	}
}

// The history file and its directory are the user's alone: typed lines
// may hold secrets.
func TestPrepareHistoryIsPrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state", "pyexec", "repl_history")
	if err := prepareHistory(p); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{p: 0o600, filepath.Dir(p): 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v (%v), want %v", path, fi.Mode().Perm(), err, want)
		}
	}
}
