package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// cleanPath checks a file path sent by a client (unsafePath: it names a
// tar entry, an eval file or an entrypoint) and returns it in canonical
// form: relative, slash-separated, no "." or empty components. Absolute
// paths and ".." components are refused outright rather than cleaned away,
// so what runs is what the client named; so is a path beyond the bounds of
// a workspace path (sandbox.MaxPathBytes, MaxPathDepth, MaxNameBytes). what
// names the path in messages, e.g. `tar entry "../x"`.
func cleanPath(unsafePath, what string) (string, error) {
	if err := sandbox.CheckPathLimits(unsafePath); err != nil {
		return "", errorf(http.StatusBadRequest, "%s: %v", what, err)
	}
	switch {
	case unsafePath == "":
		return "", errorf(http.StatusBadRequest, "%s: empty path", what)
	case strings.ContainsRune(unsafePath, 0):
		return "", errorf(http.StatusBadRequest, "%s: path contains a NUL byte", what)
	case strings.HasPrefix(unsafePath, "/"):
		return "", errorf(http.StatusBadRequest, "%s: absolute paths are not allowed", what)
	}
	parts := strings.Split(unsafePath, "/")
	kept := parts[:0]
	for _, p := range parts {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", errorf(http.StatusBadRequest, "%s: \"..\" path components are not allowed", what)
		}
		kept = append(kept, p)
	}
	if len(kept) == 0 {
		return "", errorf(http.StatusBadRequest, "%s: path names no file", what)
	}
	return strings.Join(kept, "/"), nil
}

// fileSet tracks the paths of a project being assembled and rejects
// duplicates and a file that is also used as a directory ("a" and "a/b").
type fileSet struct {
	files map[string]bool
	dirs  map[string]bool
}

func newFileSet() *fileSet {
	return &fileSet{files: map[string]bool{}, dirs: map[string]bool{}}
}

// add records the clean path p; what names it in messages.
func (s *fileSet) add(p, what string) error {
	if s.files[p] {
		return errorf(http.StatusBadRequest, "%s: duplicate file name", what)
	}
	if s.dirs[p] {
		return errorf(http.StatusBadRequest, "%s: is also used as a directory", what)
	}
	for i := strings.IndexByte(p, '/'); i >= 0; i = nextSlash(p, i) {
		if dir := p[:i]; s.files[dir] {
			return errorf(http.StatusBadRequest, "%s: %q is a file, not a directory", what, dir)
		}
	}
	for i := strings.IndexByte(p, '/'); i >= 0; i = nextSlash(p, i) {
		s.dirs[p[:i]] = true
	}
	s.files[p] = true
	return nil
}

func nextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// quotedMax is how much of an untrusted path a message quotes.
const quotedMax = 128

// quoted names an untrusted path in a message, escaped so that control
// characters in it cannot forge log lines or terminal output, and cut
// after quotedMax bytes so that a huge name does not make a huge message.
func quoted(kind, unsafePath string) string {
	if len(unsafePath) > quotedMax {
		return fmt.Sprintf("%s %q... (%d bytes)", kind, unsafePath[:quotedMax], len(unsafePath))
	}
	return fmt.Sprintf("%s %q", kind, unsafePath)
}
