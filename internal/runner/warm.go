package runner

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// RequestFD is the descriptor on which a warm driver waits for its request
// (sandbox.Spec.Requests).
const RequestFD = 4

// WarmArgv is the command line of a driver started ahead of its work under
// the interpreter at python: it blocks on RequestFD until a request (see
// Warm) arrives, then runs it exactly as the cold command line would.
func WarmArgv(python string) []string {
	return []string{python, "-B", "-c", driverSource, "--wait-request", strconv.Itoa(RequestFD)}
}

// Warm turns a cold run — the argv Argv built and its environment env —
// into the warm command line and the request that completes it, given the
// environment base the warm driver starts with. It refuses (ok false) an
// argv that is not the driver's, and environment additions that an already
// running interpreter cannot honour (PYTHON* variables act at start-up) or
// that remove a base variable.
func Warm(argv, env, base []string) (warm []string, request []byte, ok bool) {
	if len(argv) < 4 || argv[1] != "-B" || argv[2] != "-c" || argv[3] != driverSource {
		return nil, nil, false
	}
	var extra []string
	for _, kv := range env {
		if slices.Contains(base, kv) {
			continue
		}
		if strings.HasPrefix(kv, "PYTHON") {
			return nil, nil, false
		}
		extra = append(extra, kv)
	}
	for _, kv := range base {
		key, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, key+"=") }) {
			return nil, nil, false
		}
	}
	rest := argv[4:]
	var b bytes.Buffer
	field := func(s string) bool {
		if strings.IndexByte(s, 0) >= 0 {
			return false
		}
		b.WriteString(s)
		b.WriteByte(0)
		return true
	}
	field(strconv.Itoa(len(rest)))
	for _, s := range append(slices.Clone(rest), extra...) {
		if !field(s) {
			return nil, nil, false
		}
	}
	return WarmArgv(argv[0]), b.Bytes(), true
}
