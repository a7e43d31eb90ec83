package api

import (
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// snapshotBrowserServer serves the API over a real engine with sessions
// and snapshots (enginetest keeps them in its store), room for a session,
// its fork and a restore, without keys.
func snapshotBrowserServer(t *testing.T) *httptest.Server {
	t.Helper()
	eng := enginetest.Start(t, engine.Config{Concurrency: 2, QueueSize: 4, DefaultTimeout: 60 * time.Second,
		Sessions: engine.SessionConfig{Max: 4, DefaultMemoryBytes: 128 << 20}},
		func(st *store.NATS, jails *sandbox.Manager) engine.Deps {
			return engine.Deps{Artifacts: st, Jails: jails}
		})
	c := config.Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := New(eng, Options{Config: c, Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// TestPlaygroundSnapshotsInBrowser drives the notebook's snapshots in
// Chromium over a real server: x = 41 is saved (the lock beside it is
// named as not kept), the session is forked and the fork changes x while
// the parent, reached again from the session list, still has 41; the
// snapshot restored into a third session has 41 too; the snapshot is
// deleted from the list, and the three sessions are ended one by one.
func TestPlaygroundSnapshotsInBrowser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the playground runs code in real jails")
	}
	ctx, problems := browser(t)
	ts := snapshotBrowserServer(t)
	p := page{t: t, ctx: ctx}
	p.do(chromedp.Navigate(ts.URL + "/#/notebook"))
	p.waitFor("the cells", `document.querySelectorAll("#cells .cell").length === 2`, 20*time.Second)
	p.waitFor("the snapshot list", `document.querySelectorAll("#nb-snap-list li").length === 1`, 20*time.Second)
	if got := p.text("#nb-snap-list"); !strings.Contains(got, "No snapshot yet") {
		t.Fatalf("the empty snapshot list says %q", got)
	}
	p.typeCode(`#cells .cell[data-cell="1"]`, "import threading\nx = 41\nlock = threading.Lock()")
	p.typeCode(`#cells .cell[data-cell="2"]`, "x")
	p.do(chromedp.Click(chromedp.CSS("#nb-start")))
	p.waitFor("the session", `document.getElementById("nb-save").disabled === false`, 30*time.Second)
	parent := eval[string](p, `document.getElementById("nb-sessions").value`)
	p.do(chromedp.Click(chromedp.CSS("#nb-run-all")))
	p.waitFor("x in the parent", `document.querySelector('#cells .cell[data-cell="2"] .count').textContent === "[2]"`, 30*time.Second)
	x := func() string { return strings.TrimSpace(p.text(`#cells .cell[data-cell="2"] .cell-output`)) }
	if got := x(); got != "41" {
		t.Fatalf("x in the parent: %q", got)
	}

	// Save: the id, the size and what was not kept.
	p.do(chromedp.Click(chromedp.CSS("#nb-save")))
	p.waitFor("the save", `/^Save(d | failed)/.test(document.getElementById("nb-status").textContent)`, 30*time.Second)
	saved := regexp.MustCompile(`^Saved snapshot (snap_\S+) of (\S+) \((\d+(\.\d)? (B|KiB|MiB))\)\. Not kept: lock \(`).
		FindStringSubmatch(p.text("#nb-status"))
	if saved == nil || saved[2] != parent {
		t.Fatalf("after Save snapshot the status says %q (session %s)", p.text("#nb-status"), parent)
	}
	snap := saved[1]
	row := fmt.Sprintf(`#nb-snap-list li[data-snapshot=%q]`, snap)
	p.waitFor("the snapshot in the list", fmt.Sprintf(`!!document.querySelector(%q)`, row), 10*time.Second)

	// Fork: the notebook goes on in the child, which diverges.
	p.do(chromedp.Click(chromedp.CSS("#nb-fork")))
	p.waitFor("the fork", `/^Fork(ed | failed)/.test(document.getElementById("nb-status").textContent)`, 30*time.Second)
	child := eval[string](p, `document.getElementById("nb-sessions").value`)
	if !strings.HasPrefix(p.text("#nb-status"), "Forked "+parent+" into "+child) || child == parent {
		t.Fatalf("after Fork the status says %q; session %s, parent %s", p.text("#nb-status"), child, parent)
	}
	p.typeCode(`#cells .cell[data-cell="1"]`, "x = 1007")
	p.do(chromedp.Click(chromedp.CSS("#nb-run-all")))
	p.waitFor("x in the fork", `document.querySelector('#cells .cell[data-cell="2"] .count').textContent === "[4]"`, 30*time.Second)
	if got := x(); got != "1007" {
		t.Fatalf("x in the fork after x = 1007: %q", got)
	}

	// The parent, chosen again in the session list, still has 41.
	runIn := func(id, want string) {
		t.Helper()
		_ = eval[bool](p, fmt.Sprintf(`(() => { const s = document.getElementById("nb-sessions"); s.value = %q;
			return s.dispatchEvent(new Event("change")); })()`, id))
		p.waitFor("the switch", fmt.Sprintf(`document.getElementById("nb-status").textContent === "Cells now run in session %s."`, id), 10*time.Second)
		p.do(chromedp.Click(chromedp.CSS(`#cells .cell[data-cell="2"] .cell-run`)))
		p.waitFor("x", `/^\[\d+\]$/.test(document.querySelector('#cells .cell[data-cell="2"] .count').textContent)`, 30*time.Second)
		if got := x(); got != want {
			t.Fatalf("x in session %s: %q, want %s", id, got, want)
		}
	}
	runIn(parent, "41")

	// Restore the snapshot into a third session.
	p.do(chromedp.Click(chromedp.CSS(row + " .snap-restore")))
	p.waitFor("the restore", `/^Restore(d | failed)/.test(document.getElementById("nb-status").textContent)`, 60*time.Second)
	restored := eval[string](p, `document.getElementById("nb-sessions").value`)
	if !strings.HasPrefix(p.text("#nb-status"), "Restored "+snap+" into session "+restored) || restored == parent || restored == child {
		t.Fatalf("after Restore the status says %q; session %s", p.text("#nb-status"), restored)
	}
	if n := eval[int](p, `document.getElementById("nb-sessions").options.length`); n != 3 {
		t.Fatalf("the session list holds %d sessions, want 3", n)
	}
	p.do(chromedp.Click(chromedp.CSS(`#cells .cell[data-cell="2"] .cell-run`)))
	p.waitFor("x restored", `/^\[\d+\]$/.test(document.querySelector('#cells .cell[data-cell="2"] .count').textContent)`, 30*time.Second)
	if got := x(); got != "41" {
		t.Fatalf("x in the restored session: %q", got)
	}
	runIn(child, "1007")
	p.screenshot("notebook-snapshots")

	p.do(chromedp.Click(chromedp.CSS(row + " .snap-delete")))
	p.waitFor("the deletion", fmt.Sprintf(`!document.querySelector(%q) && document.getElementById("nb-status").textContent === "Deleted snapshot %s."`, row, snap), 20*time.Second)
	if n := listed(p, "snapshots"); n != 0 {
		t.Fatalf("the server still lists %d snapshots after the delete", n)
	}

	// End the three: the notebook goes on in the others, then has none.
	for range 2 {
		// The status of the end before still reads "ended; cells now
		// run in": cleared, so the wait below sees this end's.
		eval[string](p, `document.getElementById("nb-status").textContent = ""`)
		p.do(chromedp.Click(chromedp.CSS("#nb-end")))
		p.waitFor("an end", `/ ended; cells now run in /.test(document.getElementById("nb-status").textContent)`, 20*time.Second)
	}
	p.do(chromedp.Click(chromedp.CSS("#nb-end")))
	p.waitFor("the last end", `document.getElementById("nb-status").textContent === "Session ended." && !document.getElementById("nb-start").disabled`, 20*time.Second)
	if n := listed(p, "sessions"); n != 0 {
		t.Fatalf("the server still lists %d sessions after the three ends", n)
	}
	for _, problem := range problems() {
		t.Errorf("page problem: %s", problem)
	}
}

// listed is how many objects GET /api/v1/<what> lists, asked from the page.
func listed(p page, what string) int {
	p.t.Helper()
	n, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](fmt.Sprintf(`fetch("/api/v1/%s").then((r) => r.json()).then((j) => (j.%s || []).length)`,
		what, what), chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("listing %s: %v", what, err)
	}
	return n
}
