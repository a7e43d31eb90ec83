package config

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/pyexec/pyexec/internal/preview"
)

// Preview configures previews: a session's web app reached through
// /api/v1/sessions/{id}/ports/{port}/ and shared preview URLs
// (docs/preview.md).
type Preview struct {
	// Enabled serves previews; off, their routes answer 501.
	Enabled bool
	// TTL is how long a shared preview URL works.
	TTL time.Duration
	// Host is the separate origin preview URLs are served on
	// ("[scheme://]host[:port]" or "[scheme://]*.domain[:port]"); empty,
	// they are served on the API's origin, sandboxed.
	Host string
	// MaxConns bounds the connections open at once to one session's port;
	// MaxBytes what one connection carries (both ways); IdleTimeout
	// closes a connection quiet that long.
	MaxConns int
	// MaxKeyConns bounds the connections open at once to the previews of
	// one key's sessions (the owner's and the URLs' apart).
	MaxKeyConns int
	MaxBytes    int64
	IdleTimeout time.Duration
}

func defaultPreview() Preview {
	return Preview{TTL: time.Hour, MaxConns: 32, MaxKeyConns: 128, MaxBytes: 256 << 20, IdleTimeout: 5 * time.Minute}
}

func (p *Preview) bind(fs *pflag.FlagSet) {
	add := func(name, usage string) { describe(fs, name, usage) }
	fs.BoolVar(&p.Enabled, "preview", p.Enabled, "")
	add("preview", "serve previews of web apps sessions run (/api/v1/sessions/{id}/ports/{port}/) and shared preview URLs")
	fs.Var(secondsValue{&p.TTL}, "preview-ttl", "")
	add("preview-ttl", "how long a shared preview URL works")
	fs.StringVar(&p.Host, "preview-host", p.Host, "")
	add("preview-host", "separate origin of preview URLs, [https://]host[:port] or [https://]*.domain[:port] (default: the API's origin, sandboxed)")
	fs.IntVar(&p.MaxConns, "preview-max-conns", p.MaxConns, "")
	add("preview-max-conns", "connections open at once to one session's port by its owner's key, and as many through its preview URLs")
	fs.IntVar(&p.MaxKeyConns, "preview-max-key-conns", p.MaxKeyConns, "")
	add("preview-max-key-conns", "connections open at once to the previews of one key's sessions by that key, and as many through its preview URLs")
	fs.Var(sizeValue{&p.MaxBytes}, "preview-max-bytes", "")
	add("preview-max-bytes", "bytes one preview connection carries, both ways together")
	fs.Var(secondsValue{&p.IdleTimeout}, "preview-idle-timeout", "")
	add("preview-idle-timeout", "a preview connection quiet this long is closed")
}

func (c *Config) validatePreview(bad func(env, format string, args ...any)) {
	p := c.Preview
	if p.TTL < time.Second {
		bad("PYEXEC_PREVIEW_TTL", "must be at least 1s, got %v", p.TTL)
	}
	if _, err := preview.ParseOrigin(p.Host); err != nil {
		bad("PYEXEC_PREVIEW_HOST", "%v", err)
	}
	if p.MaxConns < 1 {
		bad("PYEXEC_PREVIEW_MAX_CONNS", "must be at least 1, got %d", p.MaxConns)
	}
	if p.MaxKeyConns < 1 {
		bad("PYEXEC_PREVIEW_MAX_KEY_CONNS", "must be at least 1, got %d", p.MaxKeyConns)
	}
	if p.MaxBytes < 1 {
		bad("PYEXEC_PREVIEW_MAX_BYTES", "must be at least 1, got %d", p.MaxBytes)
	}
	if p.IdleTimeout < time.Second {
		bad("PYEXEC_PREVIEW_IDLE_TIMEOUT", "must be at least 1s, got %v", p.IdleTimeout)
	}
}

// PreviewLimits are the limits of one preview.
func (p Preview) PreviewLimits() preview.Limits {
	return preview.Limits{Conns: p.MaxConns, KeyConns: p.MaxKeyConns, Bytes: p.MaxBytes, Idle: p.IdleTimeout}
}
