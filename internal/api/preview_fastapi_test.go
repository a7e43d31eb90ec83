package api

import (
	"bytes"
	"encoding/json"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// fastAPIApp is a cell that writes a FastAPI app, serves it with uvicorn
// from a child process on 127.0.0.1:8000 and waits until it listens. Its
// page, on an orange background, opens a WebSocket at a path relative to
// itself (the preview's prefix is not the app's to know) and shows what
// the app echoed.
const fastAPIApp = `
import socket, subprocess, sys, time
open('app.py', 'w').write('''
from fastapi import FastAPI, WebSocket
from fastapi.responses import HTMLResponse

app = FastAPI()

PAGE = """<!doctype html><html><body style="background:#ff8800;margin:0;height:100vh">
<h1>fastapi in a session</h1><p id="out">waiting</p>
<script>
const ws = new WebSocket(new URL("ws", location.href).href.replace(/^http/, "ws"));
ws.onopen = () => ws.send("browser");
ws.onmessage = (e) => { document.getElementById("out").textContent = e.data; };
ws.onerror = () => { document.getElementById("out").textContent = "websocket error"; };
</script></body></html>"""

@app.get("/", response_class=HTMLResponse)
def index():
    return PAGE

@app.websocket("/ws")
async def echo(ws: WebSocket):
    await ws.accept()
    msg = await ws.receive_text()
    await ws.send_text("fastapi echo:" + msg)
''')
log = open('uvicorn.log', 'w')
app = subprocess.Popen([sys.executable, '-m', 'uvicorn', 'app:app', '--host', '127.0.0.1', '--port', '8000'],
                       stdout=log, stderr=log)
for _ in range(300):
    try:
        socket.create_connection(('127.0.0.1', 8000), timeout=1).close()
        break
    except OSError:
        if app.poll() is not None:
            break
        time.sleep(0.1)
print('listening' if app.poll() is None else 'uvicorn ended: ' + open('uvicorn.log').read())
`

// TestPreviewFastAPIInBrowser is the check with a real framework:
// a FastAPI app installed from PyPI into a session renders in Chromium
// through a preview URL, its WebSocket included, and the screenshot shows
// the page (its orange background fills most of it). Skipped when PyPI is
// unreachable.
func TestPreviewFastAPIInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("installs fastapi and uvicorn from PyPI; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the app runs in a real session")
	}
	if !pyenvtest.PyPIReachable() {
		t.Skip("PyPI (https://pypi.org/simple) is unreachable: fastapi and uvicorn cannot be installed")
	}
	ctx, problems := browser(t)
	start := time.Now()
	ts := startPyPIPreview(t, 512<<20, "")

	js := "application/json"
	code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions", js,
		[]byte(`{"requirements":"fastapi\nuvicorn\nwebsockets\n"}`), as(keyA))
	if code != http.StatusCreated {
		t.Fatalf("a session with fastapi: %d %s", code, body)
	}
	ses := decode[SessionInfo](t, body).SessionID
	installed := time.Since(start)
	cell, _ := json.Marshal(map[string]string{"code": fastAPIApp})
	code, _, body = call(t, ts, http.MethodPost, "/api/v1/sessions/"+ses+"/execute", js, cell, as(keyA))
	if code != http.StatusOK || !strings.Contains(string(body), "listening") {
		t.Fatalf("starting uvicorn: %d %s", code, body)
	}
	code, _, body = call(t, ts, http.MethodPost, "/api/v1/sessions/"+ses+"/ports/8000/share", "", nil, as(keyA))
	if code != http.StatusCreated {
		t.Fatalf("share: %d %s", code, body)
	}
	sh := decode[PreviewShare](t, body)

	p := page{t: t, ctx: ctx}
	p.do(chromedp.Navigate(ts.URL + sh.URL))
	p.waitFor("the app's WebSocket echo", `(document.getElementById("out")?.textContent || "") !== "waiting"`, 60*time.Second)
	if got := p.text("#out"); got != "fastapi echo:browser" {
		t.Errorf("the page's WebSocket: %q", got)
	}
	if h := p.text("h1"); h != "fastapi in a session" {
		t.Errorf("rendered heading %q", h)
	}
	shot := previewScreenshot(t, ctx, "fastapi.png")
	if share := orangeShare(t, shot); share < 0.5 {
		t.Errorf("the screenshot is %.0f%% the page's orange, want most of it (test-output/preview/fastapi.png)", share*100)
	}
	for _, pr := range problems() {
		t.Errorf("browser: %s", pr)
	}
	t.Logf("install %s, whole test %s", installed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// startPyPIPreview serves the API, with previews, over a real engine whose
// sessions install their requirements from PyPI (uv into a fresh
// environment directory) and get memory bytes by default. With
// previewHost (a host name, say "preview.localhost"), preview URLs are
// served on http://previewHost:<the server's port>, a separate origin.
func startPyPIPreview(t *testing.T, memory int64, previewHost string) *httptest.Server {
	t.Helper()
	uv, _ := pyenvtest.Tools(t)
	envs, err := pyenv.NewEnvironments(pyenv.EnvConfig{Dir: pyenvtest.EnvDir(t), UV: uv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(envs.Close)
	eng := enginetest.Start(t, engine.Config{Sessions: engine.SessionConfig{Max: 2, DefaultMemoryBytes: memory},
		Preview: testPreviewConfig(t, time.Hour)},
		func(_ *store.NATS, jails *sandbox.Manager) engine.Deps {
			res, err := pyenv.NewResolver(pyenv.NewAnalyzer(jails, pyenv.AnalyzerConfig{}), pyenv.ResolverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return engine.Deps{Jails: jails, Envs: engine.PyenvEnvironments{Resolver: res, Envs: envs}}
		})
	ts := httptest.NewUnstartedServer(nil)
	c := config.Default()
	c.APIKeys = []string{"a:" + keyA}
	c.Preview.Enabled = true
	if previewHost != "" {
		_, port, err := net.SplitHostPort(ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Preview.Host = "http://" + net.JoinHostPort(previewHost, port)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := New(eng, Options{Config: c, Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = s.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// orangeShare is the share of the PNG's pixels in the page's #ff8800.
func orangeShare(t *testing.T, shot []byte) float64 {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	b := img.Bounds()
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 > 0xf0 && g>>8 > 0x78 && g>>8 < 0x98 && bl>>8 < 0x10 {
				n++
			}
		}
	}
	return float64(n) / float64(b.Dx()*b.Dy())
}
