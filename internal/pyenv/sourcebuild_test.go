package pyenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
)

// TestSourceBuilds: an sdist is refused by default and, with source
// builds allowed, built in a jail whose proxy reaches only the index.
func TestSourceBuilds(t *testing.T) {
	run := jail(t)
	var leaks atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { leaks.Add(1) }))
	defer other.Close()
	ix := pyenvtest.NewIndex(t, testWheels()...)
	ix.AddSdist(t, pyenvtest.Sdist{Name: "srconly", Version: "1.0", Files: map[string]string{"srconly.py": "VALUE = 'built from source'\n"}})
	ix.AddSdist(t, pyenvtest.Sdist{Name: "nosy", Version: "1.0", Files: map[string]string{"nosy.py": "X = 1\n"},
		BuildHook: fmt.Sprintf(`import urllib.request
try:
    urllib.request.urlopen(%q, timeout=10)
except Exception as e:
    raise SystemExit("nosy: fetching outside the index failed: %%s" %% e)`, other.URL+"/leak")})
	in := python(t, "")

	t.Run("off: an sdist is an install error", func(t *testing.T) {
		m := newTestEnvs(t, ix, nil)
		_, err := m.Acquire(context.Background(), in, set(t, "srconly"), nil)
		var ie *InstallError
		if !errors.Is(err, ErrInstall) || !errors.As(err, &ie) || !strings.Contains(ie.Output, "srconly") ||
			!strings.Contains(ie.Error(), "source builds are off") {
			t.Fatalf("error %v, want an InstallError naming srconly and the source build setting", err)
		}
	})
	jailed := func(c *EnvConfig) { c.AllowSourceBuilds, c.Jails = true, run }
	t.Run("on: the sdist is built in the jail", func(t *testing.T) {
		m := newTestEnvs(t, ix, jailed)
		l, err := m.Acquire(context.Background(), in, set(t, "srconly", "pyyaml"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		if got := runIn(t, run, in, l, "import srconly, yaml; print(srconly.VALUE, yaml.VERSION)"); got != "built from source fake-6.0.99\n" {
			t.Errorf("in the jail: %q", got)
		}
		st, err := os.Stat(l.Env.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Geteuid() {
			t.Errorf("the environment is owned by uid %d, want the server's %d", uid, os.Geteuid())
		}
	})
	t.Run("on: a host outside the index is refused", func(t *testing.T) {
		m := newTestEnvs(t, ix, jailed)
		var mu sync.Mutex
		var lines []string
		_, err := m.Acquire(context.Background(), in, set(t, "nosy"), func(s string) {
			mu.Lock()
			lines = append(lines, s)
			mu.Unlock()
		})
		if !errors.Is(err, ErrInstall) {
			t.Fatalf("error %v, want an install error", err)
		}
		mu.Lock()
		out := strings.Join(lines, "\n")
		mu.Unlock()
		host := strings.TrimPrefix(other.URL, "http://")
		if !strings.Contains(out, "proxy refused "+host) || !strings.Contains(out, "Forbidden") {
			t.Errorf("progress lacks the proxy's refusal of %s:\n%s", host, out)
		}
		if n := leaks.Load(); n != 0 {
			t.Errorf("the host outside the index got %d requests", n)
		}
	})
}

func TestIndexHosts(t *testing.T) {
	for _, tc := range []struct {
		name string
		urls []string
		want []string
	}{
		{"pypi brings its file host", []string{"https://pypi.org/simple"}, []string{"pypi.org:443", "files.pythonhosted.org:443"}},
		{"explicit port and case", []string{"http://Mirror.example:8080/simple/"}, []string{"mirror.example:8080"}},
		{"file index needs no host", []string{"file:///srv/wheels"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := indexHosts(tc.urls)
			if len(got) != len(tc.want) {
				t.Fatalf("hosts %v, want %v", got, tc.want)
			}
			for _, w := range tc.want {
				if !got[w] {
					t.Errorf("hosts %v lack %s", got, w)
				}
			}
		})
	}
}
