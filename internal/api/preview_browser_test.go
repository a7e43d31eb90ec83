package api

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestPreviewInBrowser: in Chromium, the playground's origin holds the
// user's key in local storage; a preview URL on that same origin (no
// preview host) renders the session's app, whose page tries to read the
// key and to call the API with it: the sandbox stops both, and its
// WebSocket still works. The screenshot is checked through the page's
// text and kept under test-output/preview.
func TestPreviewInBrowser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the app runs in a real session")
	}
	ctx, problems := browser(t)
	st := startPreviewStack(t, time.Hour)
	code, _, body := call(t, st.api, http.MethodPost, "/api/v1/sessions/"+st.session+"/ports/8000/share", "", nil, as(keyA))
	sh := decode[PreviewShare](t, body)
	if code != http.StatusCreated {
		t.Fatalf("share: %d %s", code, body)
	}
	p := page{t: t, ctx: ctx}
	// The playground's origin, with the key where the playground keeps it.
	p.do(chromedp.Navigate(st.api.URL + "/"))
	eval[any](p, `localStorage.setItem("pyexec-test-key", "`+keyA+`")`)

	p.do(chromedp.Navigate(st.api.URL + sh.URL + "probe"))
	p.waitFor("the probe's result", `(document.getElementById("out")?.textContent || "").includes('"done":true')`, 60*time.Second)
	var got struct {
		Storage, Cookie, API, WS string
	}
	out := p.text("#out")
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("probe: %q", out)
	}
	if !strings.HasPrefix(got.Storage, "blocked") || strings.Contains(out, keyA) {
		t.Errorf("the app read the origin's storage: %s", out)
	}
	if strings.HasPrefix(got.API, "200") {
		t.Errorf("the app called the API: %s", out)
	}
	if got.WS != "echo:browser" {
		t.Errorf("WebSocket in the browser: %s", out)
	}
	if h := p.text("h1"); h != "preview probe" {
		t.Errorf("rendered heading %q", h)
	}
	previewScreenshot(t, ctx, "probe.png")
	t.Logf("probe: %s", out)
	// The sandbox's refusals are expected; nothing else may go wrong.
	for _, pr := range problems() {
		if !strings.Contains(pr, "sandbox") && !strings.Contains(pr, "SecurityError") && !strings.Contains(pr, "Content Security Policy") {
			t.Errorf("browser: %s", pr)
		}
	}
}

// previewScreenshot captures the tab of ctx into test-output/preview/name
// and returns the PNG.
func previewScreenshot(t *testing.T, ctx context.Context, name string) []byte {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "test-output", "preview")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	return buf
}
