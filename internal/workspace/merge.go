package workspace

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// The concurrency rule. A writer — a run, a session, an API call — changes
// a copy and commits its changes at the end as a change set against the
// version it started from (its base). The commit applies it to the
// workspace's current version (the head), path by path:
//
//   - A path the head still has as the base had it (nobody else changed it
//     since the base) takes this writer's change. So writers that change
//     different paths all land, whatever their order: 20 runs each adding
//     its own file leave 20 files.
//   - A path both this writer and an earlier commit changed, differently, is
//     a conflict. The earlier commit's state stays at the path; this
//     writer's file (or directory of files) is kept beside it as
//     "<path>.conflict-<version>", <version> being the version this commit
//     creates, and the commit reports the conflict with both names. A
//     deletion in conflict with a change keeps the change (nothing to save).
//   - Two writers making the same change do not conflict, and directories
//     never conflict with directories (their mode is the earlier writer's).
//   - Structure holds afterwards: a file of this writer inside a directory
//     another writer replaced by a file moves under the conflict name too,
//     and a directory this writer deleted while another added files to it
//     stays, with those files (reported).
//
// Nothing a writer wrote is dropped without its commit saying so: what is
// not at its path is at the conflict name reported, or refused with a
// reason (over quota, a link out, a device...).

// Conflict is one path this writer changed that another writer changed
// first, since the base version.
type Conflict struct {
	Path string `json:"path"`
	// KeptAs is where this writer's content was saved; empty when there
	// was nothing to save (a deletion, or a directory left in place).
	KeptAs string `json:"kept_as,omitempty"`
	Reason string `json:"reason"`
}

// Refused is a path of a change set that was not kept.
type Refused struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// merged is the head with a change set applied.
type merged struct {
	man                      manifest
	ours                     map[string]bool // paths whose entry is this writer's
	added, modified, deleted int
	conflicts                []Conflict
}

// merge applies changes (path → new entry, nil to delete), made against
// base (version baseNum), to head. next is the number of the version being
// made, which names conflict copies.
func merge(base, head manifest, baseNum, next int64, changes map[string]*entry) merged {
	r := &merger{
		merged: merged{man: maps.Clone(head), ours: map[string]bool{}},
		base:   base, head: head, baseNum: baseNum, next: next, moved: map[string]string{},
	}
	if r.man == nil {
		r.man = manifest{}
	}
	for _, p := range slices.Sorted(maps.Keys(changes)) {
		r.change(p, changes[p])
	}
	r.settle()
	return r.merged
}

type merger struct {
	merged
	base, head    manifest
	baseNum, next int64
	moved         map[string]string // this writer's path → its conflict name
}

func (r *merger) change(p string, o *entry) {
	b, inBase := r.base[p]
	h, inHead := r.head[p]
	switch {
	case inBase == inHead && (!inBase || b == h):
		r.apply(p, o) // nobody else changed p since the base
	case o != nil && inHead && o.same(h):
		// the same change, made by both
	case o == nil && !inHead:
		// both deleted it
	case o != nil && o.Kind == kindDir && (!inHead || h.Kind == kindDir):
		// A directory both have keeps the head's mode; one the other writer
		// deleted stays deleted unless this writer's files are in it
		// (settle brings it back for them).
	case o == nil && inBase && b.Kind == kindDir && inHead && h.Kind == kindDir:
		// a directory this writer deleted and another changed the mode of:
		// delete it (settle puts it back if files remain in it)
		delete(r.man, p)
		r.deleted++
	case o == nil:
		r.conflicts = append(r.conflicts, Conflict{Path: p,
			Reason: fmt.Sprintf("deleted by this writer but changed by another since version %d; the other's change is kept", r.baseNum)})
	default:
		to := r.conflictName(p)
		e := *o
		e.Path = to
		r.man[to] = e
		r.ours[to] = true
		r.conflicts = append(r.conflicts, Conflict{Path: p, KeptAs: to,
			Reason: fmt.Sprintf("changed by another writer since version %d; theirs is kept at the path, this writer's at %s", r.baseNum, to)})
	}
}

func (r *merger) apply(p string, o *entry) {
	if o == nil {
		if _, had := r.man[p]; had {
			delete(r.man, p)
			r.deleted++
		}
		return
	}
	old, had := r.man[p]
	r.man[p] = *o
	r.ours[p] = true
	switch {
	case !had:
		r.added++
	case old != *o:
		r.modified++
	}
}

// conflictName returns the name this writer's p is saved as: one of its
// own if p was moved already, else p + ".conflict-<next>", numbered on
// if that is taken, within the path limits (conflictPath).
func (r *merger) conflictName(p string) string {
	if to, ok := r.moved[p]; ok {
		return to
	}
	suffix := ".conflict-" + strconv.FormatInt(r.next, 10)
	to := conflictPath(p, suffix)
	for i := 2; r.taken(to); i++ {
		to = conflictPath(p, suffix+"-"+strconv.Itoa(i))
	}
	r.moved[p] = to
	return to
}

// conflictPath is p with suffix added to its last component, the name cut
// (at a character's start) so the component stays within
// sandbox.MaxNameBytes and the path within sandbox.MaxPathBytes. A folder
// so deep that no name fits gets the copy at the top instead.
func conflictPath(p, suffix string) string {
	dir, name := path.Split(p)
	keep := min(sandbox.MaxNameBytes, sandbox.MaxPathBytes-len(dir)) - len(suffix)
	if keep < 1 {
		dir = ""
		keep = sandbox.MaxNameBytes - len(suffix)
	}
	if len(name) > keep {
		for keep > 0 && !utf8.RuneStart(name[keep]) {
			keep--
		}
		name = name[:keep]
	}
	return dir + name + suffix
}

func (r *merger) taken(p string) bool {
	if _, ok := r.man[p]; ok {
		return true
	}
	for _, to := range r.moved {
		if to == p {
			return true
		}
	}
	return false
}

// settle mends structure until every entry's parents are directories:
// each side was a tree on its own, so a clash is between this writer's
// entry and another's, and the other's stays where it is.
func (r *merger) settle() {
	for changed := true; changed; {
		changed = false
		for _, p := range r.man.paths() {
			if _, ok := r.man[p]; !ok {
				continue // moved by this pass
			}
			if r.settlePath(p) {
				changed = true
			}
		}
	}
}

// settlePath mends the first parent of p that is not a directory and
// reports whether it changed anything.
func (r *merger) settlePath(p string) bool {
	var fix string
	parentDirs(p, func(d string) {
		if e, ok := r.man[d]; fix == "" && (!ok || e.Kind != kindDir) {
			fix = d
		}
	})
	if fix == "" {
		return false
	}
	e, exists := r.man[fix]
	switch {
	case !exists && r.ours[p]:
		// Another writer deleted the directory this writer added to.
		r.man[fix] = r.dirEntry(fix, r.base)
	case !exists:
		// This writer deleted a directory another added to: it stays.
		r.man[fix] = r.dirEntry(fix, r.head)
		r.conflicts = append(r.conflicts, Conflict{Path: fix,
			Reason: "not deleted: another writer added files to it since this writer's base version"})
	case r.ours[p] && !r.ours[fix]:
		// Another writer's file where this writer has a directory: this
		// writer's entries under it move under the conflict name.
		r.moveUnder(fix)
	default:
		// This writer's file where another has a directory: the file
		// moves to the conflict name, the directory comes back.
		to := r.conflictName(fix)
		e.Path = to
		r.man[to] = e
		r.ours[to] = true
		delete(r.ours, fix)
		r.man[fix] = r.dirEntry(fix, r.head)
		r.conflicts = append(r.conflicts, Conflict{Path: fix, KeptAs: to,
			Reason: "another writer made it a directory of files; this writer's file is kept at " + to})
	}
	return true
}

// moveUnder moves this writer's entries under dir to the conflict name of
// dir, reporting each file moved.
func (r *merger) moveUnder(dir string) {
	to := r.conflictName(dir)
	r.man[to] = entry{Path: to, Kind: kindDir, Mode: 0o755}
	r.ours[to] = true
	for _, p := range r.man.under(dir) {
		if !r.ours[p] {
			continue
		}
		e := r.man[p]
		np := to + strings.TrimPrefix(p, dir)
		e.Path = np
		delete(r.man, p)
		delete(r.ours, p)
		r.man[np] = e
		r.ours[np] = true
		if e.Kind != kindDir {
			r.conflicts = append(r.conflicts, Conflict{Path: p, KeptAs: np,
				Reason: "another writer replaced " + dir + " by a file; this writer's file is kept at " + np})
		}
	}
}

// dirEntry is the directory p as from had it, or a plain one.
func (r *merger) dirEntry(p string, from manifest) entry {
	if e, ok := from[p]; ok && e.Kind == kindDir {
		return e
	}
	return entry{Path: p, Kind: kindDir, Mode: 0o755}
}
