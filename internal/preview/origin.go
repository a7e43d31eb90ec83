package preview

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// PathPrefix starts the path of a preview URL served on a host that is
// not a preview's own: /preview/<token>/…
const PathPrefix = "/preview/"

// Isolation says how far a previewed app is kept from the API's origin
// and from other previews, as the share's answer and the docs name it.
type Isolation string

const (
	// Sandboxed: no preview host; the app is served on the API's own
	// origin under Content-Security-Policy: sandbox (an opaque origin),
	// without cookies.
	Sandboxed Isolation = "sandbox"
	// SharedHost: one preview host for every preview; apart from the
	// API's origin, shared with other previews.
	SharedHost Isolation = "preview_host"
	// PerPreview: a wildcard preview host; every preview URL is an origin
	// of its own.
	PerPreview Isolation = "per_preview"
)

// Origin is where preview URLs point (--preview-host): nowhere else than
// the API's own origin (the zero Origin), one host for every preview
// ("preview.example.com"), or a host per preview under a wildcard
// ("*.preview.example.com": the first label is the share's Label, which
// is not secret; the token stays in the path, as on a shared host).
type Origin struct {
	scheme   string
	host     string // lower case, with its port if one was given
	wildcard bool
}

// ParseOrigin reads --preview-host: "" (none), "[scheme://]host[:port]" or
// "[scheme://]*.suffix[:port]". The scheme is http or https, https when
// left out.
func ParseOrigin(s string) (Origin, error) {
	if s == "" {
		return Origin{}, nil
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		scheme, rest = "https", s
	}
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		return Origin{}, fmt.Errorf("preview host %q: the scheme must be http or https", s)
	}
	rest = strings.TrimSuffix(rest, "/")
	o := Origin{scheme: scheme}
	if suffix, ok := strings.CutPrefix(rest, "*."); ok {
		o.wildcard, rest = true, suffix
	}
	host := rest
	if h, port, err := net.SplitHostPort(rest); err == nil {
		if _, err := ParsePort(port); err != nil {
			return Origin{}, fmt.Errorf("preview host %q: %w", s, err)
		}
		host = h
	}
	u, err := url.Parse(scheme + "://" + rest + "/")
	if err != nil || u.Host != rest || host == "" || strings.ContainsAny(host, "*/?#@ ") {
		return Origin{}, fmt.Errorf("preview host %q: want [http[s]://]host[:port] or [http[s]://]*.domain[:port]", s)
	}
	o.host = strings.ToLower(rest)
	return o, nil
}

// String is the Origin as ParseOrigin reads it back.
func (o Origin) String() string {
	switch {
	case o.host == "":
		return ""
	case o.wildcard:
		return o.scheme + "://*." + o.host
	}
	return o.scheme + "://" + o.host
}

// Isolation says how previews on o are kept apart.
func (o Origin) Isolation() Isolation {
	switch {
	case o.host == "":
		return Sandboxed
	case o.wildcard:
		return PerPreview
	}
	return SharedHost
}

// URL is where the preview of sh is served: a path on the API's own
// origin without a preview host ("/preview/<token>/", for the client to
// resolve against its base URL), else an absolute URL. The token is
// always in the path, never in a host name: a host name reaches DNS
// resolvers, TLS's clear SNI and, as Origin and Referer, every site the
// app's page calls.
func (o Origin) URL(sh Share) string {
	switch {
	case o.host == "":
		return PathPrefix + sh.Token + "/"
	case o.wildcard:
		return o.scheme + "://" + sh.Label + "." + o.host + PathPrefix + sh.Token + "/"
	}
	return o.scheme + "://" + o.host + PathPrefix + sh.Token + "/"
}

// FrameSource is what a page on the API's origin names in its
// Content-Security-Policy frame-src to show previews in a frame.
func (o Origin) FrameSource() string {
	switch {
	case o.host == "":
		return "'self'"
	case o.wildcard:
		return o.scheme + "://*." + o.host
	}
	return o.scheme + "://" + o.host
}

// Match says whether a request for host (its Host header) is for the
// preview origin, and for a wildcard origin the share label its first
// label carries ("" for the bare suffix, which serves nothing).
func (o Origin) Match(host string) (label string, ok bool) {
	if o.host == "" {
		return "", false
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	h = o.withoutDefaultPort(h)
	if !o.wildcard {
		return "", h == o.host
	}
	if h == o.host {
		return "", true
	}
	label, suffix, found := strings.Cut(h, ".")
	if !found || suffix != o.host {
		return "", false
	}
	return label, true
}

// withoutDefaultPort drops the scheme's default port from h when o names
// none, so that "p.example.com:443" is "p.example.com" for https.
func (o Origin) withoutDefaultPort(h string) string {
	def := ":443"
	if o.scheme == "http" {
		def = ":80"
	}
	if !strings.Contains(o.host, ":") {
		return strings.TrimSuffix(h, def)
	}
	return h
}
