package pyenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ErrToolNotFound: a helper program (uv, ruff) is neither configured nor
// on $PATH.
var ErrToolNotFound = errors.New("tool not found")

// FindTool returns the absolute, symlink-resolved path of a helper
// program: configured when set (it must exist and be executable), else
// name looked up on $PATH.
func FindTool(name, configured string) (string, error) {
	p := configured
	if p == "" {
		var err error
		if p, err = exec.LookPath(name); err != nil {
			return "", fmt.Errorf("%w: %s is not on $PATH", ErrToolNotFound, name)
		}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrToolNotFound, p, err)
	}
	st, err := os.Stat(real)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s is not an executable file", ErrToolNotFound, real)
	}
	return real, nil
}
