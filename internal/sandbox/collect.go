package sandbox

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"
)

// Collect asks for the files a payload leaves in the workspace. They are
// gathered by the jail's init after the payload exited and every process
// it left was killed, before the jail is destroyed, and arrive in
// Result.Files. Nothing is collected from a run that was stopped (timeout,
// kill, OOM, output limit).
//
// The walk never follows a symbolic link and takes only regular files:
// links, devices, fifos and sockets are skipped, so a payload cannot make
// the server read anything outside its workspace.
type Collect struct {
	// Globs select files by their workspace-relative path, with path.Match
	// syntax per segment plus "**" for any number of segments ("out/*.csv",
	// "**/*.png"). Empty means every file the run created or changed: one
	// that was not among Spec.Files or whose content differs from it.
	// With globs, matching files are taken changed or not.
	Globs []string
	// MaxFiles caps the number of files; zero means DefaultCollectFiles.
	MaxFiles int
	// MaxBytes caps their total size; zero means DefaultCollectBytes. A
	// file that does not fit is left out (Result.FilesOmitted) and the
	// walk goes on with smaller ones.
	MaxBytes int64
}

// Defaults and bounds of Collect.
const (
	DefaultCollectFiles = 100
	DefaultCollectBytes = 64 << 20
	// collectWait bounds how long the parent waits for init to hand the
	// files over after the payload exited.
	collectWait = 10 * time.Second
)

// CollectedFile is one file taken from the workspace.
type CollectedFile struct {
	Path string // workspace-relative, slash-separated, clean
	Data []byte
	Mode uint32 // permission bits
}

func (c *Collect) withDefaults() Collect {
	out := *c
	if out.MaxFiles == 0 {
		out.MaxFiles = DefaultCollectFiles
	}
	if out.MaxBytes == 0 {
		out.MaxBytes = DefaultCollectBytes
	}
	return out
}

func (c *Collect) validate() error {
	if c == nil {
		return nil
	}
	if c.MaxFiles < 0 || c.MaxBytes < 0 {
		return fmt.Errorf("%w: negative collect limit", ErrInvalidSpec)
	}
	for _, g := range c.Globs {
		if g == "" || path.IsAbs(g) || strings.IndexByte(g, 0) >= 0 {
			return fmt.Errorf("%w: collect glob %q must be a relative pattern", ErrInvalidSpec, g)
		}
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("%w: collect glob %q: %w", ErrInvalidSpec, g, err)
		}
	}
	return nil
}

// matchGlob reports whether the slash-separated name matches pattern,
// where a "**" segment matches zero or more segments.
func matchGlob(pattern, name string) bool {
	return matchSegments(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchSegments(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// fileMsg carries one collected file from init to the parent; collectedMsg
// ends the sequence.
type fileMsg struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"`
	Data []byte `json:"data"`
}

type collectedMsg struct {
	Omitted int `json:"omitted"` // regular files left out by the caps
}

// receiveFiles reads the files init sends after the exit message until
// the end marker. It checks what init sends against the same caps, so a
// confused init cannot make the parent hold more than asked for.
func receiveFiles(w *wire, c Collect) ([]CollectedFile, int, error) {
	var files []CollectedFile
	var total int64
	for {
		m, err := w.recv()
		if err != nil {
			return files, 0, err
		}
		switch {
		case m.Kind == kindCollected && m.Collected != nil:
			return files, m.Collected.Omitted, nil
		case m.Kind == kindError && m.Error != nil:
			return files, 0, m.Error
		case m.Kind != kindFile || m.File == nil:
			return files, 0, fmt.Errorf("protocol: got %q message while collecting files", m.Kind)
		}
		p, err := cleanRelPath(m.File.Path)
		total += int64(len(m.File.Data))
		switch {
		case err != nil:
			return files, 0, err
		case len(files) >= c.MaxFiles || total > c.MaxBytes:
			return files, 0, fmt.Errorf("protocol: init sent more files than the collect limits allow")
		}
		files = append(files, CollectedFile{Path: p, Data: m.File.Data, Mode: m.File.Mode & 0o777})
	}
}

// collected is what the parent received of the files; the fields are
// written by the goroutine reading init's messages before it closes done.
type collected struct {
	done    chan struct{}
	files   []CollectedFile
	omitted int
	err     error
}

// wait gives init collectWait to send the files, less if ctx ends.
func (c *collected) wait(ctx context.Context) {
	t := time.NewTimer(collectWait)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	case <-ctx.Done():
	}
}
