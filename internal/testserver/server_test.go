package testserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeServe stands in for `pyexec serve`: its first start fails as serve
// does on a taken port, every later one answers /health on its --port.
const fakeServe = `import http.server, os, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
marker = os.path.join(os.path.dirname(sys.argv[0]), "failed-once")
if not os.path.exists(marker):
    open(marker, "w").close()
    print("Error: listening on 127.0.0.1:%d: listen tcp 127.0.0.1:%d: bind: address already in use" % (port, port))
    sys.exit(1)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
`

// A server whose port was taken between FreePort and its listen is
// started again on another port; any other failure to start is not.
func TestServerStartsAgainWhenItsPortWasTaken(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "serve.py")
	if err := os.WriteFile(bin, []byte("#!/usr/bin/env python3\n"+fakeServe), 0o755); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Binary: bin, Dir: dir, StartTimeout: 20 * time.Second, StopTimeout: 5 * time.Second})
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("the second start should have answered: %v", err)
	}
	defer s.Stop()
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Errorf("URL %q", s.URL)
	}

	failing := filepath.Join(dir, "fails.sh")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'config: --max-timeout must be positive'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := New(Config{Binary: failing, Dir: dir, StartTimeout: 20 * time.Second, StopTimeout: 5 * time.Second})
	err := f.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Fatalf("a server that fails for another reason: %v", err)
	}
}
