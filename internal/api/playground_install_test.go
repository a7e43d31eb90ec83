package api

import (
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

// TestPlaygroundInstallProgress runs code with a requirement from the
// playground on a server that installs it (uv, from a loopback index):
// the installer's progress is shown while the environment is built, then
// the code runs with the package.
func TestPlaygroundInstallProgress(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the playground runs code in real jails")
	}
	ctx, problems := browser(t)
	uv, _ := pyenvtest.Tools(t)
	ix := pyenvtest.NewIndex(t, pyenvtest.Wheel{Name: "tinyreq", Version: "1.2", Files: map[string]string{"tinyreq.py": "VERSION = '1.2'\n"}})
	envs, err := pyenv.NewEnvironments(pyenv.EnvConfig{Dir: pyenvtest.EnvDir(t), IndexURL: ix.URL, UV: uv, Base: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(envs.Close)
	eng := enginetest.Start(t, engine.Config{Concurrency: 1, QueueSize: 2, DefaultTimeout: 30 * time.Second},
		func(_ *store.NATS, jails *sandbox.Manager) engine.Deps {
			res, err := pyenv.NewResolver(pyenv.NewAnalyzer(jails, pyenv.AnalyzerConfig{}), pyenv.ResolverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return engine.Deps{Envs: engine.PyenvEnvironments{Resolver: res, Envs: envs}}
		})
	s, err := New(eng, Options{Config: config.Default(), Version: "test", Isolation: "jail"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)

	p := page{t: t, ctx: ctx}
	p.do(chromedp.Navigate(ts.URL + "/"))
	p.waitFor("the editor", `!!document.querySelector("#editor .cm-content") && !document.getElementById("script-view").hidden`, 20*time.Second)
	p.do(chromedp.SendKeys(chromedp.CSS("#requirements"), "tinyreq==1.2"))
	p.runScript("import tinyreq\nprint('tinyreq', tinyreq.VERSION)\n")
	p.finished()
	if out := p.text("#console"); !strings.Contains(out, "tinyreq 1.2") {
		t.Fatalf("console %q", out)
	}
	log := eval[string](p, `document.getElementById("install").hidden ? "" : document.getElementById("install-log").textContent`)
	if !strings.Contains(log, "tinyreq") {
		t.Fatalf("install progress shown: %q", log)
	}
	p.screenshot("install")
	for _, problem := range problems() {
		t.Errorf("page problem: %s", problem)
	}
}
