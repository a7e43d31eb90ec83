package egress

import (
	"testing"

	"github.com/pyexec/pyexec/internal/egress/http1"
)

// TestOverrides: a _method query key is recognised as the frameworks
// read it (percent-decoded in either case, '+', '.', ' ' and '[' as '_',
// split on ';' too), and keys that merely look alike are not.
func TestOverrides(t *testing.T) {
	for target, want := range map[string]bool{
		"/repos/x?_method=DELETE":       true,
		"/repos/x?_METHOD=DELETE":       true,
		"/repos/x?%5Fmethod=DELETE":     true,
		"/repos/x?%5fmethod=DELETE":     true,
		"/repos/x?%5f%6Dethod=DELETE":   true,
		"/repos/x?.method=DELETE":       true,
		"/repos/x?+method=DELETE":       true,
		"/repos/x?%20method=DELETE":     true,
		"/repos/x?[method=DELETE":       true,
		"/repos/x?_method[]=DELETE":     true,
		"/repos/x?a=1;_method=DELETE":   true,
		"/repos/x?a=1&&_method":         true,
		"/repos/x?+_method=DELETE":      true,
		"/repos/x?method=DELETE":        false,
		"/repos/x?x_method=DELETE":      false,
		"/repos/x?a=_method":            false,
		"/repos/x?_methods=1":           false,
		"/repos/x?q=%5Fmethod%3DDELETE": false,
	} {
		if got := overrides(&http1.Head{Method: "POST", Target: target}); got != want {
			t.Errorf("%s: overrides %v, want %v", target, got, want)
		}
	}
}

// TestFormOverride: form content holding a _method field (URL-encoded,
// or a multipart part of that name) is found; other fields are not;
// multipart content that does not parse is an error.
func TestFormOverride(t *testing.T) {
	form := func(ct string) *http1.Head {
		return &http1.Head{Method: "POST", Framing: http1.Length, Length: 1,
			Fields: []http1.Field{{Name: "Content-Type", Value: ct}}}
	}
	part := func(name string) string {
		return "--b\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\nDELETE\r\n--b--\r\n"
	}
	for _, c := range []struct {
		h       *http1.Head
		content string
		want    bool
		err     bool
	}{
		{form("application/x-www-form-urlencoded"), "a=1&_method=DELETE", true, false},
		{form("application/x-www-form-urlencoded"), "a=1&%5Fmethod=DELETE", true, false},
		{form("application/x-www-form-urlencoded"), "a=1&b=_method", false, false},
		{form("multipart/form-data; boundary=b"), part("_method"), true, false},
		{form("multipart/form-data; boundary=b"), part("_method[x]"), true, false},
		{form("multipart/form-data; boundary=b"), part(".method"), true, false},
		{form("multipart/form-data; boundary=b"), part("title"), false, false},
		{form("multipart/form-data; boundary=b"), "--b\r\nno end", false, true},
		{form("multipart/form-data"), part("title"), false, true},
	} {
		got, err := formOverride(c.h, []byte(c.content))
		if got != c.want || (err != nil) != c.err {
			t.Errorf("%s %q: %v %v, want %v (error %v)", c.h.Fields[0].Value, c.content, got, err, c.want, c.err)
		}
	}
	if formContent(&http1.Head{Method: "POST", Framing: http1.Length, Length: 3,
		Fields: []http1.Field{{Name: "Content-Type", Value: "application/json"}}}) {
		t.Error("JSON content taken for a form")
	}
	if !formContent(&http1.Head{Method: "POST", Framing: http1.Chunked}) {
		t.Error("content without a Content-Type (a form to Rack) not taken for one")
	}
}
