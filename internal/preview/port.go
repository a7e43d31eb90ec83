package preview

import (
	"errors"
	"fmt"
)

// ErrBadPort: a port that is not a decimal integer 1–65535 written in
// digits only (400).
var ErrBadPort = errors.New("invalid port")

// ParsePort reads a port from a URL: 1 to 65535 in decimal digits, without
// sign, leading zero, space or anything after it. "02280", "+80", " 80",
// "80abc", "0" and "65536" are refused: a lenient parser that reads
// "02280" as 2280 (or as octal) is how a preview proxy once let a port
// through that its checks had never seen.
func ParsePort(s string) (int, error) {
	bad := func() (int, error) {
		return 0, fmt.Errorf("%w %q: want a decimal number from 1 to 65535, digits only, no leading zero", ErrBadPort, s)
	}
	if len(s) == 0 || len(s) > 5 || s[0] == '0' {
		return bad()
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return bad()
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return bad()
	}
	return n, nil
}
