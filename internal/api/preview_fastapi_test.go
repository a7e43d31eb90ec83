package api

import (
	"bytes"
	"image/png"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// fastAPIApp is a cell that writes a FastAPI app, serves it with uvicorn
// from a child process on 127.0.0.1:8000 and waits until it listens. Its
// page, on an orange background, opens a WebSocket at a path relative to
// itself (the preview's prefix is not the app's to know) and shows what
// the app echoed.
var fastAPIApp = appCell(`
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
`,
	`'-m', 'uvicorn', 'app:app', '--host', '127.0.0.1', '--port', '8000'`, 8000)

// TestPreviewFastAPIInBrowser is the check with a real framework:
// a FastAPI app installed from PyPI into a session renders in Chromium
// through a preview URL, its WebSocket included, and the screenshot shows
// the page (its orange background fills most of it). Skipped when PyPI is
// unreachable.
func TestPreviewFastAPIInBrowser(t *testing.T) {
	skipWithoutPyPI(t, "fastapi and uvicorn")
	ctx, problems := browser(t)
	start := time.Now()
	ts := startPyPIPreview(t, 512<<20, "")
	sh, installed := shareSessionApp(t, ts, "fastapi\nuvicorn\nwebsockets\n", fastAPIApp, 8000)

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
