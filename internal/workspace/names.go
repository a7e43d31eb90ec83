package workspace

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Caller is who asks: the API key's name, and whether it is an operator
// key. It has the fields of engine.Caller, so the engine converts one into
// the other.
type Caller struct {
	// Name owns what this caller creates. An empty name owns nothing.
	Name string
	// Admin callers see and change every key's workspaces.
	Admin bool
}

// Ref names a workspace: its owner (the key's name) and its name. An empty
// Owner means the caller's own; only an admin may name another owner.
type Ref struct {
	Owner string
	Name  string
}

// AllOwners, as the owner of List, lists every key's workspaces (admin only).
const AllOwners = "*"

// resolve returns the owner of ref as c may address it: ErrNotFound when
// ref names another key's workspace and c is not an admin.
func (c Caller) resolve(ref Ref) (string, error) {
	owner := ref.Owner
	if owner == "" {
		owner = c.Name
	}
	if owner == "" || (!c.Admin && owner != c.Name) {
		return "", fmt.Errorf("%w: workspace %q", ErrNotFound, ref.Name)
	}
	if err := checkName(ref.Name); err != nil {
		return "", err
	}
	return owner, nil
}

// MaxNameBytes is the longest workspace name.
const MaxNameBytes = 64

// checkName accepts a workspace name: 1 to MaxNameBytes letters, digits,
// '-' and '_', starting with a letter or digit (it is a path segment of
// the API and a token of record keys).
func checkName(name string) error {
	if name == "" || len(name) > MaxNameBytes {
		return fmt.Errorf("%w: a workspace name is 1 to %d characters", ErrInvalid, MaxNameBytes)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || (i > 0 && (r == '-' || r == '_'))
		if !ok {
			return fmt.Errorf("%w: workspace name %s: only letters, digits, '-' and '_', starting with a letter or digit", ErrInvalid, quoted(name))
		}
	}
	return nil
}

// cleanPath checks a path inside a workspace given by a client, an archive
// or a manifest (unsafePath) and returns it canonical: relative,
// slash-separated, without "." or empty components. It holds the rules of
// uploads (internal/api cleanPath): absolute paths and ".." components are
// refused rather than cleaned away, as are NUL bytes and paths beyond the
// jail's bounds (sandbox.CheckPathLimits); it also refuses names that are
// not UTF-8, which JSON could not carry unchanged.
func cleanPath(unsafePath string) (string, error) {
	if err := sandbox.CheckPathLimits(unsafePath); err != nil {
		return "", fmt.Errorf("%w: path %s: %v", ErrInvalid, quoted(unsafePath), err)
	}
	var why string
	switch {
	case unsafePath == "":
		why = "empty path"
	case strings.IndexByte(unsafePath, 0) >= 0:
		why = "path contains a NUL byte"
	case !utf8.ValidString(unsafePath):
		why = "path is not UTF-8"
	case strings.HasPrefix(unsafePath, "/"):
		why = "absolute paths are not allowed"
	}
	if why != "" {
		return "", fmt.Errorf("%w: path %s: %s", ErrInvalid, quoted(unsafePath), why)
	}
	parts := strings.Split(unsafePath, "/")
	kept := parts[:0]
	for _, p := range parts {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", fmt.Errorf("%w: path %s: \"..\" path components are not allowed", ErrInvalid, quoted(unsafePath))
		}
		kept = append(kept, p)
	}
	if len(kept) == 0 {
		return "", fmt.Errorf("%w: path %s names no file", ErrInvalid, quoted(unsafePath))
	}
	return strings.Join(kept, "/"), nil
}

// cleanDir is cleanPath for a folder argument, where "" (or "/" or ".")
// names the workspace's top.
func cleanDir(unsafePath string) (string, error) {
	if strings.Trim(unsafePath, "/.") == "" && !strings.Contains(unsafePath, "..") {
		return "", nil
	}
	return cleanPath(strings.TrimPrefix(unsafePath, "/"))
}

// linkInside reports whether a symbolic link at p (a clean workspace path)
// with the given target resolves inside the workspace, judged on the text
// alone: relative, and never climbing above the top.
func linkInside(p, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.IndexByte(target, 0) >= 0 || !utf8.ValidString(target) {
		return false
	}
	depth := strings.Count(p, "/") // directories above the link
	for part := range strings.SplitSeq(target, "/") {
		switch part {
		case "", ".":
		case "..":
			if depth--; depth < 0 {
				return false
			}
		default:
			depth++
		}
	}
	return len(target) <= sandbox.MaxPathBytes
}

// maxLinkHops bounds how many links resolving one path follows, as the
// kernel's limit on nested links does.
const maxLinkHops = 40

// linkEscapes reports whether following the link at p in man climbs above
// the workspace's top at any step, following the tree's other links on the
// way (with at most maxLinkHops of them; more counts as escaping). Each
// link's text staying inside (linkInside) is not enough: "up" -> "../.."
// placed two levels down is inside, and "x" -> "d/e/up/../etc" then climbs
// out through it. Names the tree lacks resolve as directories would.
func (m manifest) linkEscapes(p string) bool {
	var at []string // the resolved directory, from the top
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		at = strings.Split(p[:i], "/")
	}
	todo := strings.Split(m[p].Target, "/")
	for hops := 1; len(todo) > 0; {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if len(at) == 0 {
				return true
			}
			at = at[:len(at)-1]
			continue
		}
		e, ok := m[strings.Join(append(at, part), "/")]
		if !ok || e.Kind != kindLink {
			at = append(at, part)
			continue
		}
		if hops++; hops > maxLinkHops || strings.HasPrefix(e.Target, "/") {
			return true
		}
		todo = append(strings.Split(e.Target, "/"), todo...)
	}
	return false
}

// under reports whether p is dir or inside it ("" is the top).
func under(p, dir string) bool {
	return dir == "" || p == dir || strings.HasPrefix(p, dir+"/")
}

// parentDirs calls f with each proper ancestor of the clean path p,
// shortest first ("a", "a/b" for "a/b/c").
func parentDirs(p string, f func(dir string)) {
	for i := strings.IndexByte(p, '/'); i >= 0; {
		f(p[:i])
		j := strings.IndexByte(p[i+1:], '/')
		if j < 0 {
			return
		}
		i += 1 + j
	}
}

// join joins a clean folder and a clean relative path.
func join(dir, p string) string {
	if dir == "" {
		return p
	}
	return path.Join(dir, p)
}

// quotedMax is how much of an untrusted string a message quotes.
const quotedMax = 128

// quoted names an untrusted path or name in a message, escaped so control
// characters cannot forge log lines, and cut so a huge name does not make a
// huge message.
func quoted(unsafe string) string {
	if len(unsafe) > quotedMax {
		return fmt.Sprintf("%q... (%d bytes)", unsafe[:quotedMax], len(unsafe))
	}
	return fmt.Sprintf("%q", unsafe)
}
