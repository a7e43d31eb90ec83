package sandbox

import (
	"fmt"
	"path"
	"strings"
)

// WorkspaceMountDir is where a persistent workspace appears inside a jail.
// It is not the run's own /work (WorkDir), which ends with the run.
const WorkspaceMountDir = "/workspace"

// WorkspaceMount is a persistent workspace handed to one payload, as
// internal/workspace prepares it: host directories the server mounts, in
// its own mount namespace, on the jail's slot, from where the mount
// propagates to the jail's /workspace (see slots_linux.go).
//
//   - Read-write: an overlay of Upper on Lower, with Work as overlayfs's
//     scratch directory. Its options keep the upper directory plain (no
//     redirects, no metacopy, no index, no xino), which is what the
//     workspace's commit reads.
//   - ReadOnly: Lower bound read-only, nosuid and nodev.
//
// Lower is shared by every run on the same version and is never written:
// the overlay copies up what a run changes, and a read-only bind cannot be
// written through.
type WorkspaceMount struct {
	Lower    string `json:"lower"`
	Upper    string `json:"upper,omitempty"`
	Work     string `json:"work,omitempty"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

func (w *WorkspaceMount) validate() error {
	if w == nil {
		return nil
	}
	dirs := []string{w.Lower}
	if !w.ReadOnly {
		dirs = append(dirs, w.Upper, w.Work)
	} else if w.Upper != "" || w.Work != "" {
		return fmt.Errorf("%w: a read-only workspace has no upper or work directory", ErrInvalidSpec)
	}
	for _, d := range dirs {
		// The overlay's options are one comma-separated string, and ':'
		// separates lower layers: a directory naming either would be read
		// as another option or layer.
		if !path.IsAbs(d) || path.Clean(d) != d || strings.ContainsAny(d, ",:\\\x00") {
			return fmt.Errorf("%w: workspace directory %q must be a clean absolute path without ',', ':' or '\\\\'", ErrInvalidSpec, d)
		}
	}
	return nil
}

// OverlayOptions is the data of the read-write overlay mount. Directory
// renames across layers (redirect_dir), metadata-only copy-up (metacopy),
// the inode index and xino are off: the upper directory then holds whole
// files, plain whiteouts and opaque directories, which is what a
// workspace's commit reads. A rename of a directory of the base fails with
// EXDEV, and mv falls back to copy and delete.
func (w *WorkspaceMount) OverlayOptions() string {
	return "lowerdir=" + w.Lower + ",upperdir=" + w.Upper + ",workdir=" + w.Work +
		",redirect_dir=off,metacopy=off,index=off,xino=off"
}
