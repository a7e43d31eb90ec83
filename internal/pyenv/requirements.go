package pyenv

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// ErrBadRequirement marks a requirement line that pyexec refuses: a syntax
// error, a pip option (-r, -e, --index-url...) or a direct URL or path
// reference. The API reports it as a 400.
var ErrBadRequirement = errors.New("invalid requirement")

// Source says where a requirement came from, in the order of precedence.
type Source int

// The sources of requirements, strongest first.
const (
	FromRequest   Source = iota // the request's requirements_txt
	FromProject                 // requirements.txt in the uploaded project
	FromScript                  // PEP 723 inline metadata of the entry file
	FromDetection               // auto-detected imports
)

func (s Source) String() string {
	switch s {
	case FromRequest:
		return "requirements_txt"
	case FromProject:
		return "requirements.txt"
	case FromScript:
		return "script metadata"
	case FromDetection:
		return "import detection"
	}
	return fmt.Sprintf("source(%d)", int(s))
}

// Requirement is one distribution a script needs, with its PEP 508
// constraints.
type Requirement struct {
	// Name is the PEP 503 normalised distribution name ("pyyaml").
	Name string `json:"name"`
	// Spec is the requirement as pip and uv read it, with the name
	// normalised and blanks removed outside markers: "pyyaml[c]>=6.0".
	Spec string `json:"spec"`
	// Optional requirements come from imports guarded by try/except
	// ImportError: they are installed when possible and never fail a run.
	Optional bool `json:"optional,omitempty"`
	// Source says which input asked for it.
	Source Source `json:"-"`
}

// namePattern is a PEP 508 distribution name at the start of a line.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?`)

// restPattern is what may follow the name: extras, version specifiers and
// environment markers. '@' (direct references), '/', '\' and ':' (URLs and
// paths) are absent on purpose.
var restPattern = regexp.MustCompile(`^[A-Za-z0-9<>=!~.,*+;'"()\[\] _-]*$`)

// NormalizeName returns the PEP 503 form of a distribution name.
func NormalizeName(name string) string {
	var b strings.Builder
	sep := false
	for _, r := range strings.ToLower(name) {
		if r == '-' || r == '_' || r == '.' {
			sep = true
			continue
		}
		if sep && b.Len() > 0 {
			b.WriteByte('-')
		}
		sep = false
		b.WriteRune(r)
	}
	return b.String()
}

// ParseRequirement reads one requirement such as "PyYAML >= 6.0" or
// "requests[socks]; python_version >= '3.8'".
func ParseRequirement(line string, src Source) (Requirement, error) {
	s := strings.TrimSpace(line)
	name := namePattern.FindString(s)
	if name == "" {
		return Requirement{}, fmt.Errorf("%w %q: it does not start with a distribution name", ErrBadRequirement, line)
	}
	rest := strings.TrimSpace(s[len(name):])
	if !restPattern.MatchString(rest) {
		return Requirement{}, fmt.Errorf("%w %q: only names, extras, version specifiers and markers are accepted (no URLs or paths)", ErrBadRequirement, line)
	}
	spec, marker, _ := strings.Cut(rest, ";")
	spec = strings.Join(strings.Fields(spec), "")
	if spec != "" && !strings.ContainsAny(spec[:1], "[<>=!~") {
		return Requirement{}, fmt.Errorf("%w %q: unexpected %q after the name", ErrBadRequirement, line, spec)
	}
	norm := NormalizeName(name)
	out := norm + spec
	if m := strings.Join(strings.Fields(marker), " "); m != "" {
		out += "; " + m
	}
	return Requirement{Name: norm, Spec: out, Source: src}, nil
}

// ParseRequirements reads a requirements.txt: one requirement per line,
// '#' comments, blank lines and backslash continuations. pip options
// (-r, -e, --index-url, --hash, ...) are refused: the operator, not the
// request, chooses the index, and nothing but named distributions is
// installed.
func ParseRequirements(text string, src Source) ([]Requirement, error) {
	var out []Requirement
	text = strings.ReplaceAll(text, "\\\r\n", "")
	text = strings.ReplaceAll(text, "\\\n", "")
	i := -1
	for line := range strings.SplitSeq(text, "\n") {
		i++
		if j := strings.Index(line, "#"); j >= 0 && (j == 0 || line[j-1] == ' ' || line[j-1] == '\t') {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "-"):
			return nil, fmt.Errorf("%w on line %d: option %q is not supported (the server chooses the index)", ErrBadRequirement, i+1, strings.Fields(line)[0])
		}
		if len(out) == maxRequirements {
			return nil, fmt.Errorf("%w on line %d: more than %d requirements", ErrBadRequirement, i+1, maxRequirements)
		}
		r, err := ParseRequirement(line, src)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// maxRequirements bounds the requirements of one list (a requirements.txt,
// a script's dependencies).
const maxRequirements = 1000

// Set is a normalised dependency set: one requirement per distribution,
// sorted by name. The zero Set needs nothing.
type Set []Requirement

// Merge combines requirement lists given strongest first: the first list
// that names a distribution decides its constraints. A distribution that a
// stronger list requires is never optional.
func Merge(lists ...[]Requirement) Set {
	byName := map[string]Requirement{}
	for _, list := range lists {
		for _, r := range list {
			if prev, ok := byName[r.Name]; ok {
				if !r.Optional && prev.Optional {
					prev.Optional = false
					byName[r.Name] = prev
				}
				continue
			}
			byName[r.Name] = r
		}
	}
	out := make(Set, 0, len(byName))
	for _, r := range byName {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Required returns the requirements that are not optional.
func (s Set) Required() Set {
	var out Set
	for _, r := range s {
		if !r.Optional {
			out = append(out, r)
		}
	}
	return out
}

// Optional returns the requirements that are installed only if possible.
func (s Set) Optional() Set {
	var out Set
	for _, r := range s {
		if r.Optional {
			out = append(out, r)
		}
	}
	return out
}

// Specs returns the requirement lines, in order.
func (s Set) Specs() []string {
	out := make([]string, len(s))
	for i, r := range s {
		out[i] = r.Spec
	}
	return out
}

// canonical is the text hashed into an environment's key: one line per
// requirement, optional ones marked.
func (s Set) canonical() string {
	var b strings.Builder
	for _, r := range s {
		if r.Optional {
			b.WriteString("?")
		}
		b.WriteString(r.Spec)
		b.WriteByte('\n')
	}
	return b.String()
}
