package api

import (
	"bytes"
	"fmt"
	"image/png"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// workspaceBrowserServer serves the API over a real engine with
// workspaces, sessions and previews (on the API's origin), without keys.
func workspaceBrowserServer(t *testing.T) *httptest.Server {
	t.Helper()
	eng := enginetest.StartWithWorkspaces(t, engine.Config{Concurrency: 2, QueueSize: 4, DefaultTimeout: 60 * time.Second,
		Sessions: engine.SessionConfig{Max: 2, DefaultMemoryBytes: 128 << 20}, Preview: testPreviewConfig(t, time.Hour)},
		func(st *store.NATS, jails *sandbox.Manager) engine.Deps {
			return engine.Deps{Artifacts: st, Jails: jails}
		})
	c := config.Default()
	c.Preview.Enabled = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := New(eng, Options{Config: c, Version: "test", Isolation: "jail", Workspaces: eng.WorkspaceUsage})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// previewPage is the app the notebook serves: a green page whose script
// tells the playground what it shows and from which origin.
const previewPage = `<!doctype html><html><body style="background:#00c853;margin:0;height:100vh">` +
	`<h1 id="t">hello from the session</h1>` +
	`<script>parent.postMessage(document.getElementById("t").textContent + "|" + self.origin, "*")</script></body></html>`

// TestPlaygroundWorkspaceInBrowser drives issue 32's workspace picker and
// file browser and issue 33's preview frame in Chromium over a real
// server: a workspace made in the page is what runs mount, a file a run
// writes is listed and downloads byte for byte, a file uploaded in the
// page is read by the next run, a read-only mount refuses writes, and a
// notebook session on the workspace serves an app that the page frames,
// sandboxed, until the preview is revoked.
func TestPlaygroundWorkspaceInBrowser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the playground runs code in real jails")
	}
	ctx, problems := browser(t)
	clean := func(t *testing.T) {
		t.Helper()
		for _, problem := range problems() {
			t.Errorf("page problem: %s", problem)
		}
	}
	ts := workspaceBrowserServer(t)
	downloads := t.TempDir()
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatal(err)
	}
	p := page{t: t, ctx: ctx}
	p.do(chromedp.Navigate(ts.URL + "/"))
	p.waitFor("the workspace picker", `!document.getElementById("ws-bar").hidden && !!document.querySelector("#editor .cm-content")`, 20*time.Second)

	// listed waits until the file browser shows version n and, for each
	// of want, whether it is listed.
	listed := func(p page, n int, want map[string]bool) {
		p.t.Helper()
		cond := fmt.Sprintf(`document.getElementById("ws-version").textContent.startsWith("version %d ")`, n)
		for name, in := range want {
			has := fmt.Sprintf(`!!document.querySelector('#ws-files li[data-path=%q]')`, name)
			if !in {
				has = "!" + has
			}
			cond += " && " + has
		}
		p.waitFor(fmt.Sprintf("version %d in the file browser", n), cond, 20*time.Second)
	}

	t.Run("a workspace made in the page is mounted by runs", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.do(chromedp.SendKeys(chromedp.CSS("#ws-new"), "proj"), chromedp.Click(chromedp.CSS("#ws-new-form button")))
		p.waitFor("the new workspace", `document.getElementById("ws-pick").value === "proj" && !document.getElementById("ws-browser").hidden`, 10*time.Second)
		listed(p, 0, nil)
		p.runScript("open('/workspace/out.txt', 'w').write('written by a run\\n' * 3)\nprint('wrote')")
		p.finished()
		listed(p, 1, map[string]bool{"out.txt": true})
		if got := p.text(`#ws-files li[data-path="out.txt"]`); !strings.Contains(got, "51 bytes") {
			t.Fatalf("listed %q, want 51 bytes", got)
		}
		p.screenshot("workspace")
		clean(t)
	})

	t.Run("a listed file downloads byte for byte", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.do(chromedp.Click(chromedp.CSS(`#ws-files button[aria-label="Download out.txt"]`)))
		path := filepath.Join(downloads, "out.txt")
		want := strings.Repeat("written by a run\n", 3)
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := os.ReadFile(path)
			if err == nil && string(got) == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("downloaded %q (%v), want %q", got, err, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
		clean(t)
	})

	t.Run("an uploaded file is read by the next run", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		local := filepath.Join(t.TempDir(), "in.txt")
		if err := os.WriteFile(local, []byte("uploaded bytes 123"), 0o644); err != nil {
			t.Fatal(err)
		}
		p.do(chromedp.SetUploadFiles(chromedp.CSS("#ws-upload"), []string{local}))
		listed(p, 2, map[string]bool{"out.txt": true, "in.txt": true})
		p.runScript("print('read:', open('/workspace/in.txt').read())")
		p.finished()
		if out := p.text("#console"); !strings.Contains(out, "read: uploaded bytes 123") {
			t.Fatalf("console %q", out)
		}
		clean(t)
	})

	t.Run("read-only mode refuses writes; delete makes a version", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.do(chromedp.SetValue(chromedp.CSS("#ws-mode"), "ro"))
		eval[any](p, `document.getElementById("ws-mode").dispatchEvent(new Event("change"))`)
		p.runScript("open('/workspace/nope.txt', 'w').write('x')")
		p.finished()
		if out := p.text("#console"); !strings.Contains(out, "Read-only file system") {
			t.Fatalf("a write in read-only mode: console %q", out)
		}
		p.do(chromedp.SetValue(chromedp.CSS("#ws-mode"), "rw"))
		eval[any](p, `document.getElementById("ws-mode").dispatchEvent(new Event("change"))`)
		p.do(chromedp.Click(chromedp.CSS(`#ws-files button[aria-label="Delete in.txt"]`)))
		listed(p, 3, map[string]bool{"out.txt": true, "in.txt": false, "nope.txt": false})
		clean(t)
	})

	t.Run("a notebook on the workspace previews its app in a frame", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.do(chromedp.Navigate(ts.URL + "/#/notebook"))
		p.waitFor("the cells", `document.querySelectorAll("#cells .cell").length === 2`, 10*time.Second)
		if eval[bool](p, `!document.getElementById("nb-preview").hidden`) {
			t.Fatal("the preview controls show before there is a session")
		}
		p.do(chromedp.Click(chromedp.CSS("#nb-start")))
		p.waitFor("the session", `document.getElementById("nb-run-all").disabled === false`, 30*time.Second)
		if st := p.text("#nb-status"); !strings.Contains(st, "/workspace is proj") {
			t.Fatalf("session status %q", st)
		}
		p.typeCode(`#cells .cell[data-cell="1"]`, "import functools, http.server, os, threading\n"+
			"print(open('/workspace/out.txt').read().count('run'))\n"+
			"open('/workspace/from-session.txt', 'w').write('nb')\n"+
			"os.makedirs('site', exist_ok=True)\n"+
			"open('site/index.html', 'w').write('"+previewPage+"')\n"+
			"srv = http.server.ThreadingHTTPServer(('127.0.0.1', 8000), functools.partial(http.server.SimpleHTTPRequestHandler, directory=os.path.abspath('site')))\n"+
			"threading.Thread(target=srv.serve_forever, daemon=True).start()\n"+
			"print('serving')")
		p.do(chromedp.Click(chromedp.CSS(`#cells .cell[data-cell="1"] .cell-run`)))
		p.waitFor("the app", `document.querySelector('#cells .cell[data-cell="1"] .cell-output').textContent.includes("serving")`, 30*time.Second)
		if out := p.text(`#cells .cell[data-cell="1"] .cell-output`); !strings.HasPrefix(out, "3") {
			t.Fatalf("the session read the workspace as %q", out)
		}
		eval[any](p, `(window.framed = [], window.addEventListener("message", (e) => window.framed.push(e.data)), 0)`)
		p.waitFor("the preview controls", `!document.getElementById("nb-preview").hidden`, 5*time.Second)
		p.do(chromedp.Click(chromedp.CSS("#nb-preview-form button")))
		p.waitFor("the framed page", `window.framed.length > 0`, 20*time.Second)
		// What the page in the frame shows, from its own script, and the
		// origin it runs in: opaque, not the playground's.
		if got := eval[[]string](p, `window.framed`); len(got) != 1 || got[0] != "hello from the session|null" {
			t.Fatalf("the frame reported %q", got)
		}
		frame := eval[struct {
			Src, Sandbox, Link string
			X, Y, W, H         float64
			Scale              float64
		}](p, `(() => { const f = document.getElementById("nb-preview-frame"), r = f.getBoundingClientRect();
			return {src: f.src, sandbox: f.getAttribute("sandbox"), link: document.getElementById("nb-preview-link").href,
				x: r.x, y: r.y, w: r.width, h: r.height, scale: devicePixelRatio}; })()`)
		if !strings.HasPrefix(frame.Src, ts.URL+"/preview/") || frame.Link != frame.Src {
			t.Fatalf("frame %q, link %q", frame.Src, frame.Link)
		}
		if !strings.Contains(frame.Sandbox, "allow-scripts") || strings.Contains(frame.Sandbox, "allow-same-origin") {
			t.Fatalf("frame sandbox %q", frame.Sandbox)
		}
		p.do(chromedp.ScrollIntoView(chromedp.CSS("#nb-preview-frame")))
		frame.Y = eval[float64](p, `document.getElementById("nb-preview-frame").getBoundingClientRect().y`)
		shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		p.screenshot("preview-frame")
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatal(err)
		}
		// A point near the frame's bottom left is the app's green.
		r, g, b, _ := img.At(int((frame.X+20)*frame.Scale), int((frame.Y+frame.H-20)*frame.Scale)).RGBA()
		if r>>8 > 40 || g>>8 < 160 || b>>8 > 120 {
			t.Fatalf("the frame shows rgb(%d, %d, %d), want the app's green", r>>8, g>>8, b>>8)
		}

		p.do(chromedp.Click(chromedp.CSS("#nb-preview-revoke")))
		p.waitFor("the revoke", `document.getElementById("nb-preview-frame").hidden && document.getElementById("nb-preview-status").textContent.includes("revoked")`, 10*time.Second)
		status, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`fetch(%q).then((r) => r.status)`, frame.Src), chromedp.EvalAwaitPromise))
		if err != nil || status != 403 {
			t.Fatalf("the revoked URL answers %d (%v), want 403", status, err)
		}

		// The session's changes are committed when it ends, and the file
		// browser shows them.
		p.do(chromedp.Click(chromedp.CSS("#nb-end")))
		p.waitFor("the end", `document.getElementById("nb-status").textContent === "Session ended."`, 20*time.Second)
		listed(p, 4, map[string]bool{"out.txt": true, "from-session.txt": true})
		if !eval[bool](p, `document.getElementById("nb-preview").hidden`) {
			t.Fatal("the preview controls outlive the session")
		}
		clean(t)
	})
}
