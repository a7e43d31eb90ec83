package pyenv

import (
	"context"
	"errors"
	"testing"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
)

// TestAwaitUV: with uv still being fetched, the first build waits for it
// and uses it; when the fetch fails, builds fall back to pip.
func TestAwaitUV(t *testing.T) {
	ix := pyenvtest.NewIndex(t, testWheels()...)
	uv, _ := pyenvtest.Tools(t)
	in := python(t, "")
	tests := []struct {
		name  string
		await func(context.Context) (string, error)
		want  string
	}{
		{"the fetched uv builds", func(context.Context) (string, error) { return uv, nil }, "uv"},
		{"a failed fetch means pip", func(context.Context) (string, error) { return "", errors.New("index unreachable") }, "pip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			m := newTestEnvs(t, ix, func(c *EnvConfig) {
				c.UV = ""
				c.AwaitUV = func(ctx context.Context) (string, error) { calls++; return tt.await(ctx) }
			})
			if got := m.Installer(); got != "uv (pending)" {
				t.Errorf("before any build: Installer = %q", got)
			}
			for _, req := range []string{"tinydep", "other"} {
				l, err := m.Acquire(context.Background(), in, set(t, req), nil)
				if err != nil {
					t.Fatal(err)
				}
				if l.Env.Installer != tt.want {
					t.Errorf("%s built with %s, want %s", req, l.Env.Installer, tt.want)
				}
				l.Release()
			}
			if got := m.Installer(); got != tt.want || calls != 1 {
				t.Errorf("after the builds: Installer = %q after %d waits, want %q after 1", got, calls, tt.want)
			}
		})
	}
}
