package preview

import "testing"

func TestOrigin(t *testing.T) {
	for _, tc := range []struct {
		flag, url, frame string
		iso              Isolation
	}{
		{"", "/preview/tok/", "'self'", Sandboxed},
		{"preview.example.com", "https://preview.example.com/preview/tok/", "https://preview.example.com", SharedHost},
		{"http://localhost:8080", "http://localhost:8080/preview/tok/", "http://localhost:8080", SharedHost},
		{"*.preview.example.com", "https://lbl.preview.example.com/preview/tok/", "https://*.preview.example.com", PerPreview},
		{"HTTP://*.Localhost:8080/", "http://lbl.localhost:8080/preview/tok/", "http://*.localhost:8080", PerPreview},
	} {
		o, err := ParseOrigin(tc.flag)
		if err != nil {
			t.Errorf("%q: %v", tc.flag, err)
			continue
		}
		if got := o.URL(Share{Label: "lbl", Token: "tok"}); got != tc.url {
			t.Errorf("%q: URL %q, want %q", tc.flag, got, tc.url)
		}
		if got := o.FrameSource(); got != tc.frame {
			t.Errorf("%q: frame source %q, want %q", tc.flag, got, tc.frame)
		}
		if o.Isolation() != tc.iso {
			t.Errorf("%q: isolation %q, want %q", tc.flag, o.Isolation(), tc.iso)
		}
		if back, err := ParseOrigin(o.String()); err != nil || back != o {
			t.Errorf("%q: String %q reads back as %+v, %v", tc.flag, o.String(), back, err)
		}
	}
	for _, bad := range []string{"ftp://x.example", "*.", "http://", "a b.example", "x.example/path", "x.example:0", "x.example:08080",
		"*.*.example", "user@x.example", "x.example?q"} {
		if o, err := ParseOrigin(bad); err == nil {
			t.Errorf("%q accepted as %+v", bad, o)
		}
	}
}

func TestOriginMatch(t *testing.T) {
	shared, _ := ParseOrigin("https://preview.example.com")
	wild, _ := ParseOrigin("http://*.localhost:8080")
	none, _ := ParseOrigin("")
	for _, tc := range []struct {
		o     Origin
		host  string
		token string
		ok    bool
	}{
		{shared, "preview.example.com", "", true},
		{shared, "PREVIEW.example.com.", "", true},
		{shared, "preview.example.com:443", "", true},
		{shared, "preview.example.com:8443", "", false},
		{shared, "api.example.com", "", false},
		{shared, "x.preview.example.com", "", false},
		{wild, "abc.localhost:8080", "abc", true},
		{wild, "ABC.localhost:8080", "abc", true},
		{wild, "localhost:8080", "", true},
		{wild, "abc.localhost:8081", "", false},
		{wild, "a.b.localhost:8080", "", false},
		{wild, "127.0.0.1:8080", "", false},
		{none, "localhost", "", false},
	} {
		token, ok := tc.o.Match(tc.host)
		if token != tc.token || ok != tc.ok {
			t.Errorf("%s matching %q: %q, %v; want %q, %v", tc.o, tc.host, token, ok, tc.token, tc.ok)
		}
	}
}
