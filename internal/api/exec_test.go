package api

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
)

func TestExec(t *testing.T) {
	main := tarEntry{Name: "main.py", Body: "print('hello')\n"}
	ustar := makeTar(t, tar.FormatUSTAR, main, tarEntry{Name: "pkg/", Type: tar.TypeDir, Mode: 0o755}, tarEntry{Name: "pkg/util.py", Body: "X = 1\n"})
	// PAX: a name over USTAR's 100 bytes and non-ASCII need PAX records.
	longName := strings.Repeat("d", 60) + "/" + strings.Repeat("f", 60) + "_é.py"
	pax := makeTar(t, tar.FormatPAX, tarEntry{Name: "./main.py", Body: "import x\n", Mode: 0o755}, tarEntry{Name: longName, Body: "y = 2\n"})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(ustar)
	zw.Close()
	// A gzip bomb: 1.5 MiB of directory headers (no file, so no archive
	// limit applies) in a few KiB, past the 1 MiB body cap once expanded.
	dirs := []tarEntry{main}
	for i := range 3000 {
		dirs = append(dirs, tarEntry{Name: fmt.Sprintf("d%d/", i), Type: tar.TypeDir, Mode: 0o755})
	}
	var bomb bytes.Buffer
	zw = gzip.NewWriter(&bomb)
	zw.Write(makeTar(t, tar.FormatUSTAR, dirs...))
	zw.Close()
	tooMany := []tarEntry{main}
	for i := range 5 {
		tooMany = append(tooMany, tarEntry{Name: fmt.Sprintf("f%d.py", i), Body: "pass\n"})
	}
	full := `{"entrypoint":"main.py","docker_image":"python:3.12-slim","requirements_txt":"requests==2.32.0\n",` +
		`"pre_commands":["echo hi"],"stdin":"in\n","env_vars":["A=1","B_2=x=y"],"script_args":["--n","3"],` +
		`"config":{"timeout_seconds":60,"network_disabled":true,"memory_mb":512,"disk_mb":100,"cpu_shares":512},"unknown_field":{"ignored":true}}`
	const meta = `{"entrypoint":"main.py"}`

	tests := []struct {
		name     string
		path     string // default /api/v1/exec/sync
		tar      []byte
		meta     string
		how      int
		rawCT    string // when set, rawBody is sent as is with this Content-Type
		rawBody  []byte
		fail     error
		wantCode int
		header   map[string]string
		check    func(t *testing.T, req engine.Request)
	}{
		{name: "sync metadata as form field, USTAR", tar: ustar, meta: full, how: metaFormField, wantCode: 200,
			check: func(t *testing.T, req engine.Request) {
				want := engine.Request{
					Files: []engine.File{
						{Path: "main.py", Data: []byte("print('hello')\n"), Mode: 0o644},
						{Path: "pkg/util.py", Data: []byte("X = 1\n"), Mode: 0o644},
					},
					Entrypoint: "main.py", Args: []string{"--n", "3"}, Stdin: "in\n", Env: []string{"A=1", "B_2=x=y"},
					PythonVersion: "3.12", Requirements: "requests==2.32.0\n", PreCommands: []string{"echo hi"},
					Timeout: time.Minute, MemoryBytes: 512 << 20, DiskBytes: 100 << 20, CPUShares: 512,
					Caller: "anonymous", ClientAddr: "127.0.0.1",
				}
				if !reflect.DeepEqual(req, want) {
					t.Errorf("engine request\n got %+v\nwant %+v", req, want)
				}
			}},
		{name: "sync metadata as json part, PAX", tar: pax, meta: meta, how: metaJSONPart, wantCode: 200,
			check: func(t *testing.T, req engine.Request) {
				if len(req.Files) != 2 || req.Files[0].Path != "main.py" || req.Files[0].Mode != 0o755 || req.Files[1].Path != longName {
					t.Errorf("files = %+v", req.Files)
				}
				if req.Network || req.Timeout != 0 || req.MemoryBytes != 0 {
					t.Errorf("absent config must mean defaults and no network: %+v", req)
				}
			}},
		{name: "async accepted", path: "/api/v1/exec/async", tar: ustar, meta: meta, how: metaJSONPart, wantCode: 202},
		{name: "no metadata", tar: ustar, how: metaNone, wantCode: 400},
		{name: "empty metadata", tar: ustar, meta: " ", how: metaFormField, wantCode: 400},
		{name: "missing tar part", meta: meta, how: metaFormField, wantCode: 400},
		{name: "not multipart", rawCT: "application/json", rawBody: []byte(`{"code":"print(1)"}`), wantCode: 400},
		{name: "truncated multipart", rawCT: "multipart/form-data; boundary=xyz", rawBody: []byte("--xyz\r\nContent-Disposition: form-data; name=\"tar\"\r\n\r\nabc"), wantCode: 400},
		{name: "malformed metadata json", tar: ustar, meta: `{"entrypoint":`, how: metaFormField, wantCode: 400},
		{name: "metadata field of wrong type", tar: ustar, meta: `{"config":{"timeout_seconds":"ten"}}`, how: metaJSONPart, wantCode: 400},
		{name: "gzip tar", tar: gz.Bytes(), meta: meta, how: metaFormField, wantCode: 200,
			check: func(t *testing.T, req engine.Request) {
				if len(req.Files) != 2 || req.Files[1].Path != "pkg/util.py" || string(req.Files[1].Data) != "X = 1\n" {
					t.Errorf("files = %+v", req.Files)
				}
			}},
		{name: "gzip bomb", tar: bomb.Bytes(), meta: meta, how: metaFormField, wantCode: 413},
		{name: "corrupt gzip", tar: append([]byte{0x1f, 0x8b}, "not really gzip"...), meta: meta, how: metaFormField, wantCode: 400},
		{name: "not a tar", tar: []byte(strings.Repeat("garbage!", 100)), meta: meta, how: metaFormField, wantCode: 400},
		{name: "empty tar", tar: makeTar(t, tar.FormatUSTAR), meta: meta, how: metaFormField, wantCode: 400},
		{name: "symlink", tar: makeTar(t, tar.FormatPAX, main, tarEntry{Name: "evil", Type: tar.TypeSymlink, Link: "/etc/passwd"}), meta: meta, wantCode: 400},
		{name: "hardlink", tar: makeTar(t, tar.FormatUSTAR, main, tarEntry{Name: "hard", Type: tar.TypeLink, Link: "main.py"}), meta: meta, wantCode: 400},
		{name: "char device", tar: makeTar(t, tar.FormatUSTAR, main, tarEntry{Name: "null", Type: tar.TypeChar}), meta: meta, wantCode: 400},
		{name: "block device", tar: makeTar(t, tar.FormatPAX, main, tarEntry{Name: "sda", Type: tar.TypeBlock}), meta: meta, wantCode: 400},
		{name: "fifo", tar: makeTar(t, tar.FormatUSTAR, main, tarEntry{Name: "pipe", Type: tar.TypeFifo}), meta: meta, wantCode: 400},
		{name: "absolute path", tar: makeTar(t, tar.FormatUSTAR, main, tarEntry{Name: "/etc/cron.d/x", Body: "x"}), meta: meta, wantCode: 400},
		{name: "dotdot path", tar: makeTar(t, tar.FormatPAX, main, tarEntry{Name: "a/../../escape.py", Body: "x"}), meta: meta, wantCode: 400},
		{name: "duplicate name", tar: makeTar(t, tar.FormatUSTAR, main, tarEntry{Name: "./main.py", Body: "again"}), meta: meta, wantCode: 400},
		{name: "file used as directory", tar: makeTar(t, tar.FormatUSTAR, main, tarEntry{Name: "main.py/x.py", Body: "x"}), meta: meta, wantCode: 400},
		{name: "oversize file", tar: makeTar(t, tar.FormatUSTAR, main, tarEntry{Name: "big.bin", Body: strings.Repeat("x", 1001)}), meta: meta, wantCode: 413},
		{name: "too many files", tar: makeTar(t, tar.FormatUSTAR, tooMany...), meta: meta, wantCode: 413},
		{name: "archive total too large", tar: makeTar(t, tar.FormatUSTAR, main,
			tarEntry{Name: "a.bin", Body: strings.Repeat("a", 1000)}, tarEntry{Name: "b.bin", Body: strings.Repeat("b", 1000)}), meta: meta, wantCode: 413},
		{name: "body over the cap", tar: makeTar(t, tar.FormatUSTAR, main, tarEntry{Name: "pad.bin", Body: strings.Repeat("p", 1<<20)}), meta: meta, wantCode: 413},
		{name: "timeout over max", tar: ustar, meta: `{"config":{"timeout_seconds":301}}`, wantCode: 400},
		{name: "memory over max", tar: ustar, meta: `{"config":{"memory_mb":4096}}`, wantCode: 400},
		{name: "negative disk", tar: ustar, meta: `{"config":{"disk_mb":-1}}`, wantCode: 400},
		{name: "cpu shares over max", tar: ustar, meta: `{"config":{"cpu_shares":300000}}`, wantCode: 400},
		{name: "network asked but disabled on server", tar: ustar, meta: `{"config":{"network_disabled":false}}`, wantCode: 400},
		{name: "bad env var", tar: ustar, meta: `{"env_vars":["OK=1","1BAD=x"]}`, wantCode: 400},
		{name: "env var without value", tar: ustar, meta: `{"env_vars":["JUSTNAME"]}`, wantCode: 400},
		{name: "non-python docker image means the default interpreter", tar: ustar, meta: `{"docker_image":"node:20"}`, wantCode: 200,
			check: func(t *testing.T, req engine.Request) {
				if req.PythonVersion != "" {
					t.Errorf("PythonVersion = %q, want the default", req.PythonVersion)
				}
			}},
		{name: "lint only from metadata", tar: ustar, meta: `{"lint":"only","pre_commands":["echo hi"],"requirements_txt":"pyyaml\n"}`, wantCode: 200,
			check: func(t *testing.T, req engine.Request) {
				if req.Lint != engine.LintOnly || len(req.PreCommands) != 1 || req.Requirements != "pyyaml\n" {
					t.Errorf("request = %+v", req)
				}
			}},
		{name: "lint of wrong type in metadata", tar: ustar, meta: `{"lint":1}`, wantCode: 400},
		{name: "entrypoint not in archive runs (python reports it)", tar: ustar, meta: `{"entrypoint":"app.py"}`, wantCode: 200,
			check: func(t *testing.T, req engine.Request) {
				if req.Entrypoint != "app.py" {
					t.Errorf("entrypoint = %q", req.Entrypoint)
				}
			}},
		{name: "entrypoint escapes", tar: ustar, meta: `{"entrypoint":"../main.py"}`, wantCode: 400},
		{name: "unknown python version from image", tar: ustar, meta: `{"docker_image":"python:2.7-slim"}`, wantCode: 400},
		{name: "overloaded", tar: ustar, meta: meta, fail: fmt.Errorf("admit: %w", engine.ErrOverloaded), wantCode: 429, header: map[string]string{"Retry-After": "1"}},
		{name: "async overloaded", path: "/api/v1/exec/async", tar: ustar, meta: meta, fail: engine.ErrOverloaded, wantCode: 429, header: map[string]string{"Retry-After": "1"}},
		{name: "engine closed", tar: ustar, meta: meta, fail: engine.ErrClosed, wantCode: 503},
		{name: "engine internal error", tar: ustar, meta: meta, fail: errBoom, wantCode: 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := newFakeEngine()
			eng.fail = tt.fail
			ts := newTestServer(t, eng, nil)
			ct, body := tt.rawCT, tt.rawBody
			if ct == "" {
				ct, body = multipartBody(t, tt.tar, tt.meta, tt.how)
			}
			path := tt.path
			if path == "" {
				path = "/api/v1/exec/sync"
			}
			code, hdr, resp := call(t, ts, http.MethodPost, path, ct, body, nil)
			if code != tt.wantCode {
				t.Errorf("status = %d, want %d; body %s", code, tt.wantCode, resp)
			}
			for k, v := range tt.header {
				if got := hdr.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			checkGolden(t, goldenName(t), code, hdr, resp)
			req, accepted := eng.lastRequest()
			if tt.wantCode >= 400 && accepted {
				t.Errorf("a rejected request reached the engine: %+v", req)
			}
			if tt.check != nil {
				tt.check(t, req)
			}
		})
	}
}

func TestExecNetwork(t *testing.T) {
	ustar := makeTar(t, tar.FormatUSTAR, tarEntry{Name: "main.py", Body: "pass\n"})
	tests := []struct {
		name        string
		allow       bool
		byDefault   bool
		meta        string
		wantCode    int
		wantNetwork bool
		wantAllow   []string
	}{
		{"absent means off", true, false, `{}`, 200, false, nil},
		{"disabled true means off", true, false, `{"config":{"network_disabled":true}}`, 200, false, nil},
		{"explicit false on an allowing server", true, false, `{"config":{"network_disabled":false}}`, 200, true, nil},
		{"explicit false on a refusing server", false, false, `{"config":{"network_disabled":false}}`, 400, false, nil},
		{"absent with network by default", true, true, `{}`, 200, true, nil},
		{"config without the field with network by default", true, true, `{"config":{"timeout_seconds":5}}`, 200, true, nil},
		{"explicit true beats the default", true, true, `{"config":{"network_disabled":true}}`, 200, false, nil},
		{"an allow list asks for network", true, false, `{"config":{"network":{"allow":["pypi.org:443"]}}}`, 200, true, []string{"pypi.org:443"}},
		{"an allow list on a refusing server", false, false, `{"config":{"network":{"allow":["pypi.org"]}}}`, 400, false, nil},
		{"an allow list with network disabled", true, false, `{"config":{"network_disabled":true,"network":{"allow":["pypi.org"]}}}`, 400, false, nil},
		{"an empty allow list", true, false, `{"config":{"network":{"allow":[]}}}`, 400, false, nil},
		{"a bad rule", true, false, `{"config":{"network":{"allow":["pypi.org:99999"]}}}`, 400, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := newFakeEngine()
			ts := newTestServer(t, eng, func(c *config.Config) {
				c.AllowNetwork, c.Network.Default = tt.allow, tt.byDefault
				if tt.allow {
					c.Network.Allow = []string{"*.pypi.org", "pypi.org"}
				}
			})
			ct, body := multipartBody(t, ustar, tt.meta, metaJSONPart)
			code, _, resp := call(t, ts, http.MethodPost, "/api/v1/exec/sync", ct, body, nil)
			if code != tt.wantCode {
				t.Fatalf("status = %d, want %d: %s", code, tt.wantCode, resp)
			}
			if code != http.StatusOK {
				return
			}
			req, _ := eng.lastRequest()
			if req.Network != tt.wantNetwork {
				t.Errorf("Network = %v, want %v", req.Network, tt.wantNetwork)
			}
			if !slices.Equal(req.NetworkAllow, tt.wantAllow) {
				t.Errorf("NetworkAllow = %q, want %q", req.NetworkAllow, tt.wantAllow)
			}
		})
	}
	// config.secrets reaches the engine as it was sent (the engine checks
	// the names: an unknown one and another key's get the same 400).
	t.Run("secrets", func(t *testing.T) {
		eng := newFakeEngine()
		ts := newTestServer(t, eng, func(c *config.Config) {
			c.AllowNetwork, c.Network.Allow = true, []string{"api.github.com"}
		})
		ct, body := multipartBody(t, ustar, `{"config":{"network_disabled":false,"secrets":["GITHUB_TOKEN","OTHER"]}}`, metaJSONPart)
		if code, _, resp := call(t, ts, http.MethodPost, "/api/v1/exec/sync", ct, body, nil); code != http.StatusOK {
			t.Fatalf("status = %d: %s", code, resp)
		}
		if req, _ := eng.lastRequest(); !req.Network || !slices.Equal(req.Secrets, []string{"GITHUB_TOKEN", "OTHER"}) {
			t.Errorf("network %v, secrets %q", req.Network, req.Secrets)
		}
	})
}
