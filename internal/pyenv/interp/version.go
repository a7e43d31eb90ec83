package interp

import (
	"fmt"
	"strconv"
	"strings"
)

// MinVersion is the oldest CPython minor version that is offered.
const MinVersion = "3.8"

// minor is a parsed "MAJOR.MINOR" version.
type minor struct{ major, minor int }

func (m minor) String() string { return fmt.Sprintf("%d.%d", m.major, m.minor) }

func (m minor) less(o minor) bool {
	return m.major < o.major || (m.major == o.major && m.minor < o.minor)
}

// parseMinor reads "3.12" or "3.12.1" (anything after the second dot is
// ignored, so "3.13.0rc1" works) and returns its major and minor numbers.
func parseMinor(s string) (minor, bool) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return minor{}, false
	}
	maj, ok1 := number(parts[0])
	mnr, ok2 := number(parts[1])
	if !ok1 || !ok2 {
		return minor{}, false
	}
	if len(parts) == 3 && !validPatch(parts[2]) {
		return minor{}, false
	}
	return minor{maj, mnr}, true
}

// validPatch accepts "1", "0rc1", "0a2", "1+": a number and an optional suffix.
func validPatch(s string) bool {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i > 0
}

// number parses a non-negative decimal without sign or leading zeros.
func number(s string) (int, bool) {
	if s == "" || len(s) > 4 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
