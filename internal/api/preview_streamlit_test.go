package api

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// streamlitApp is a cell that writes a Streamlit script and runs it from a
// child process on 127.0.0.1:8501, then waits until it listens. The page
// itself is Streamlit's client: everything the script shows (the title,
// the button, the count, the orange theme) reaches it over Streamlit's
// WebSocket, and a click goes back the same way and reruns the script.
// No base path is given: the proxy strips the preview's prefix and the
// client finds its server relative to the page's URL.
var streamlitApp = appCell(`
import streamlit as st

st.title("streamlit in a session")
if "clicks" not in st.session_state:
    st.session_state.clicks = 0
if st.button("Count"):
    st.session_state.clicks += 1
st.markdown("clicks: %d" % st.session_state.clicks)
`,
	`'-m', 'streamlit', 'run', 'app.py', '--server.address', '127.0.0.1', '--server.port', '8501',
	'--server.headless', 'true', '--server.fileWatcherType', 'none', '--browser.gatherUsageStats', 'false',
	'--theme.base', 'light', '--theme.backgroundColor', '#ff8800'`, 8501)

// TestPreviewStreamlitInBrowser is the check with a framework that
// lives on its WebSocket: a Streamlit app installed from PyPI into a
// session renders in Chromium through a preview URL on a separate origin
// (--preview-host, a *.localhost name Chromium resolves to loopback), a
// click on its button goes over the WebSocket and changes the text, and
// the screenshot shows the app's orange theme over most of the page.
// Skipped when PyPI is unreachable.
func TestPreviewStreamlitInBrowser(t *testing.T) {
	skipWithoutPyPI(t, "streamlit")
	ctx, problems := browser(t)
	start := time.Now()
	ts := startPyPIPreview(t, 1<<30, "preview.localhost")
	sh, installed := shareSessionApp(t, ts, "streamlit\n", streamlitApp, 8501)
	if sh.Isolation != "preview_host" || !strings.HasPrefix(sh.URL, "http://preview.localhost:") {
		t.Fatalf("the share is not on the preview host: %+v", sh)
	}

	p := page{t: t, ctx: ctx}
	p.do(chromedp.Navigate(sh.URL))
	p.waitFor("the script's output", `document.body.innerText.includes("clicks: 0")`, 60*time.Second)
	if h := eval[string](p, `document.querySelector("h1")?.innerText || ""`); h != "streamlit in a session" {
		t.Errorf("rendered heading %q", h)
	}
	p.do(chromedp.Click(chromedp.CSS(`[data-testid="stButton"] button`)))
	p.waitFor("the click's rerun", `document.body.innerText.includes("clicks: 1")`, 30*time.Second)
	shot := previewScreenshot(t, ctx, "streamlit.png")
	if share := orangeShare(t, shot); share < 0.5 {
		t.Errorf("the screenshot is %.0f%% the theme's orange, want most of it (test-output/preview/streamlit.png)", share*100)
	}
	for _, pr := range problems() {
		t.Errorf("browser: %s", pr)
	}
	t.Logf("install %s, whole test %s", installed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
