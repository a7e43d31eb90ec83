package api

import (
	"net/http"
	"strconv"
	"strings"
)

// cleanAccept rewrites a request's Accept header to media ranges and their
// q values only, dropping empty ranges and other parameters. huma's content
// negotiation indexes into each parameter and panics on a short one such as
// "a;b" (a 500 for a header any client may send); what it is given after
// this is always in the form it parses.
func cleanAccept(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := r.Header.Values("Accept"); len(h) > 0 {
			if clean := acceptRanges(strings.Join(h, ",")); clean != "" {
				r.Header.Set("Accept", clean)
			} else {
				r.Header.Del("Accept")
			}
		}
		next.ServeHTTP(w, r)
	})
}

// acceptRanges is an Accept header's ranges as "type/subtype;q=N", comma
// separated, in their order.
func acceptRanges(h string) string {
	var out []string
	for elem := range strings.SplitSeq(h, ",") {
		parts := strings.Split(elem, ";")
		name := strings.TrimSpace(parts[0])
		if name == "" || strings.ContainsAny(name, " \t") {
			continue
		}
		for _, p := range parts[1:] {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if !ok || strings.TrimSpace(k) != "q" {
				continue
			}
			if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && q >= 0 && q <= 1 {
				name += ";q=" + strconv.FormatFloat(q, 'f', -1, 64)
			}
			break
		}
		out = append(out, name)
	}
	return strings.Join(out, ",")
}
