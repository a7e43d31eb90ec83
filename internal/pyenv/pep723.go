package pyenv

import (
	"fmt"
	"strings"
)

// ScriptDependencies reads the PEP 723 inline metadata of a script:
//
//	# /// script
//	# requires-python = ">=3.11"
//	# dependencies = [
//	#   "requests<3",
//	#   "rich",
//	# ]
//	# ///
//
// and returns its dependencies. A script without a script block needs
// nothing; a block that is malformed, or two script blocks, are an error
// wrapping ErrBadRequirement. Only the top-level dependencies array is read:
// the other keys of the block ([tool.*] tables, requires-python) do not
// change what is installed.
func ScriptDependencies(source string) ([]Requirement, error) {
	block, found, err := scriptBlock(source)
	if err != nil || !found {
		return nil, err
	}
	items, err := tomlStringArray(block, "dependencies")
	if err != nil {
		return nil, fmt.Errorf("%w in the script metadata: %w", ErrBadRequirement, err)
	}
	if len(items) > maxRequirements {
		return nil, fmt.Errorf("%w: the script metadata lists more than %d dependencies", ErrBadRequirement, maxRequirements)
	}
	out := make([]Requirement, 0, len(items))
	for _, it := range items {
		r, err := ParseRequirement(it, FromScript)
		if err != nil {
			return nil, fmt.Errorf("script metadata: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// scriptBlock returns the TOML text of the "script" metadata block, with
// the comment prefixes removed.
func scriptBlock(source string) (string, bool, error) {
	var body strings.Builder
	found, in := false, false
	i := -1
	for line := range strings.SplitSeq(source, "\n") {
		i++
		trimmed := strings.TrimRight(line, " \t\r")
		switch {
		case !in && trimmed == "# /// script":
			if found {
				return "", false, fmt.Errorf("%w: line %d starts a second script metadata block", ErrBadRequirement, i+1)
			}
			found, in = true, true
		case in && trimmed == "# ///":
			in = false
		case in && (trimmed == "#" || strings.HasPrefix(trimmed, "# ")):
			body.WriteString(strings.TrimPrefix(strings.TrimPrefix(trimmed, "#"), " "))
			body.WriteByte('\n')
		case in:
			return "", false, fmt.Errorf("%w: the script metadata block opened above line %d is not closed with '# ///'", ErrBadRequirement, i+1)
		}
	}
	if in {
		return "", false, fmt.Errorf("%w: the script metadata block is not closed with '# ///'", ErrBadRequirement)
	}
	return body.String(), found, nil
}

// tomlStringArray finds `key = [ "a", 'b', ... ]` among the top-level keys
// of a TOML document and returns its strings. It understands what script
// metadata uses: basic and literal strings, comments, trailing commas and
// arrays over several lines. A missing key is an empty array.
func tomlStringArray(doc, key string) ([]string, error) {
	s := doc
	for s != "" {
		line, rest, _ := strings.Cut(s, "\n")
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") {
			return nil, nil // a table starts: the top-level keys are over
		}
		k, v, ok := strings.Cut(t, "=")
		if ok && strings.Trim(strings.TrimSpace(k), `"'`) == key {
			v = strings.TrimSpace(v)
			if !strings.HasPrefix(v, "[") {
				return nil, fmt.Errorf("%s is not an array", key)
			}
			// Parse from the '[' onwards, across the following lines.
			off := len(doc) - len(s) + strings.Index(s, "=") + 1
			return parseArray(doc[off:])
		}
		s = rest
	}
	return nil, nil
}

// parseArray reads a TOML array of strings from the start of s (leading
// blanks allowed).
func parseArray(s string) ([]string, error) {
	s = strings.TrimLeft(s, " \t")
	if !strings.HasPrefix(s, "[") {
		return nil, fmt.Errorf("expected '['")
	}
	s = s[1:]
	var out []string
	wantValue := true
	for {
		s = skipBlank(s)
		if s == "" {
			return nil, fmt.Errorf("the array is not closed")
		}
		switch c := s[0]; {
		case c == ']':
			return out, nil
		case c == ',' && !wantValue:
			wantValue = true
			s = s[1:]
		case (c == '"' || c == '\'') && wantValue:
			end := closingQuote(s)
			if end < 0 {
				return nil, fmt.Errorf("unterminated string")
			}
			v := s[1:end]
			if c == '"' {
				v = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(v)
			}
			out = append(out, v)
			s = s[end+1:]
			wantValue = false
		default:
			return nil, fmt.Errorf("unexpected %q in the array", firstLine(s))
		}
	}
}

// skipBlank skips spaces, newlines and # comments.
func skipBlank(s string) string {
	for s != "" {
		switch s[0] {
		case ' ', '\t', '\r', '\n':
			s = s[1:]
		case '#':
			_, rest, _ := strings.Cut(s, "\n")
			s = rest
		default:
			return s
		}
	}
	return s
}

// closingQuote returns the index of the quote closing the string that s
// starts with, or -1. Single-line strings only, as script metadata uses.
func closingQuote(s string) int {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\n':
			return -1
		case q == '"' && s[i] == '\\':
			i++
		case s[i] == q:
			return i
		}
	}
	return -1
}
