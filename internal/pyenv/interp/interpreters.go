package interp

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Sentinel errors. Callers compare with errors.Is.
var (
	// ErrUnknownVersion: no interpreter of the requested version is
	// available (a *VersionError carries the details).
	ErrUnknownVersion = errors.New("unsupported python version")
	// ErrNoInterpreter: discovery found no usable interpreter at all.
	ErrNoInterpreter = errors.New("no usable python interpreter found")
)

// Interpreter is one usable CPython.
type Interpreter struct {
	// Version is "MAJOR.MINOR", e.g. "3.12".
	Version string
	// Full is the complete version, e.g. "3.12.1".
	Full string
	// Path is the interpreter binary with every symlink resolved; the jail
	// runs it at the same path.
	Path string
	// Mounts are the host directories, outside those every jail mounts
	// (/usr, /lib, /lib64, /bin, /sbin), that must be bound read-only at the
	// same path for the interpreter to run: its prefixes, standard library
	// and libpython.
	Mounts []string
}

// Interpreters is the set of interpreters an engine may use: one per minor
// version, and a default. It is immutable after Discover.
type Interpreters struct {
	list []Interpreter // sorted by version, oldest first
	def  Interpreter
}

// All returns the interpreters, oldest version first.
func (s *Interpreters) All() []Interpreter {
	out := make([]Interpreter, len(s.list))
	for i, in := range s.list {
		out[i] = in
		out[i].Mounts = append([]string(nil), in.Mounts...)
	}
	return out
}

// Default returns the interpreter used when a request names no version.
func (s *Interpreters) Default() Interpreter {
	d := s.def
	d.Mounts = append([]string(nil), d.Mounts...)
	return d
}

// Versions returns the available "MAJOR.MINOR" versions, oldest first.
func (s *Interpreters) Versions() []string {
	out := make([]string, len(s.list))
	for i, in := range s.list {
		out[i] = in.Version
	}
	return out
}

// Lookup returns the interpreter for version: "" selects the default,
// "3.12" and "3.12.1" both select the 3.12 interpreter (the patch level is
// not matched: one interpreter serves each minor version). Anything else
// yields a *VersionError wrapping ErrUnknownVersion.
func (s *Interpreters) Lookup(version string) (Interpreter, error) {
	if version == "" {
		return s.Default(), nil
	}
	if m, ok := parseMinor(version); ok {
		for _, in := range s.list {
			if in.Version == m.String() {
				in.Mounts = append([]string(nil), in.Mounts...)
				return in, nil
			}
		}
	}
	return Interpreter{}, &VersionError{Requested: version, Supported: s.Versions()}
}

// VersionError says that a requested version is not available and which
// ones are. Its message is the one API clients see.
type VersionError struct {
	Requested string
	Supported []string // oldest first
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("unsupported python_version %q; supported versions: %s",
		e.Requested, strings.Join(e.Supported, ", "))
}

// Unwrap makes errors.Is(err, ErrUnknownVersion) hold.
func (e *VersionError) Unwrap() error { return ErrUnknownVersion }

// newInterpreters orders list and picks the default: def when set (it must
// be available), else the newest version.
func newInterpreters(list []Interpreter, def string) (*Interpreters, error) {
	if len(list) == 0 {
		return nil, ErrNoInterpreter
	}
	sort.Slice(list, func(i, j int) bool {
		a, _ := parseMinor(list[i].Version)
		b, _ := parseMinor(list[j].Version)
		return a.less(b)
	})
	s := &Interpreters{list: list, def: list[len(list)-1]}
	if def != "" {
		d, err := s.Lookup(def)
		if err != nil {
			return nil, fmt.Errorf("default python version: %w", err)
		}
		s.def = d
	}
	return s, nil
}
