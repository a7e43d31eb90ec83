package run

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv"
)

// oneDiag is a linter that reports one F401.
type oneDiag struct{}

func (oneDiag) Lint(context.Context, []File, pyenv.LintRules) ([]pyenv.Diagnostic, error) {
	return []pyenv.Diagnostic{{Code: "F401"}}, nil
}

func TestLateLinter(t *testing.T) {
	files := []File{{Path: "main.py", Data: []byte("import os\n")}}
	t.Run("a request waits for the linter", func(t *testing.T) {
		x := NewLateLinter("ruff is being fetched", time.Minute)
		time.AfterFunc(50*time.Millisecond, func() { x.Set(oneDiag{}) })
		if x.State() != "starting" || LinterReady(x) != nil {
			t.Errorf("before Set: state %s, ready %v", x.State(), LinterReady(x))
		}
		d, err := x.Lint(context.Background(), files, pyenv.LintRules{})
		if err != nil || len(d) != 1 || x.State() != "ready" {
			t.Errorf("Lint = %v, %v; state %s", d, err, x.State())
		}
	})
	t.Run("past the wait it is 503", func(t *testing.T) {
		x := NewLateLinter("ruff is being fetched", 10*time.Millisecond)
		if _, err := x.Lint(context.Background(), files, pyenv.LintRules{}); !errors.Is(err, ErrUnavailable) {
			t.Errorf("err = %v, want ErrUnavailable", err)
		}
	})
	t.Run("after a failure it is 400 at once", func(t *testing.T) {
		x := NewLateLinter("ruff is being fetched", time.Hour)
		x.Fail("ruff could not be fetched")
		if _, err := x.Lint(context.Background(), files, pyenv.LintRules{}); !errors.Is(err, ErrInvalid) || x.State() != "unavailable" {
			t.Errorf("err = %v, state %s", err, x.State())
		}
		if !errors.Is(LinterReady(x), ErrInvalid) {
			t.Errorf("LinterReady = %v", LinterReady(x))
		}
	})
}
