package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
)

// pathWithout is the environment with every $PATH entry that holds one of
// tools removed: a host as a new user has it, without uv or ruff.
func pathWithout(tools ...string) []string {
	var env []string
	for _, kv := range cleanEnv() {
		dirs, ok := strings.CutPrefix(kv, "PATH=")
		if !ok {
			env = append(env, kv)
			continue
		}
		var kept []string
		for _, d := range filepath.SplitList(dirs) {
			has := false
			for _, tool := range tools {
				if _, err := os.Stat(filepath.Join(d, tool)); err == nil {
					has = true
				}
			}
			if !has {
				kept = append(kept, d)
			}
		}
		env = append(env, "PATH="+strings.Join(kept, string(filepath.ListSeparator)))
	}
	return env
}

// toolsHealth is the tools part of /health.
type toolsHealth struct {
	UV        struct{ State, Source, Path string } `json:"uv"`
	Ruff      struct{ State, Source, Path string } `json:"ruff"`
	Installer string                               `json:"installer"`
	Lint      string                               `json:"lint"`
}

func getTools(t *testing.T, url string) toolsHealth {
	t.Helper()
	resp, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Tools *toolsHealth `json:"tools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Tools == nil {
		t.Fatalf("/health without tools: %v", err)
	}
	return *h.Tools
}

// TestFreshMachineProvisionsTools: on a host without uv or ruff on PATH,
// serve fetches the pinned ones from PyPI into its data dir (under /tmp,
// where the jail has its own directory) in the background; then lint
// works, a requirements run is installed with uv, and a titled plot says
// nothing about fontconfig.
func TestFreshMachineProvisionsTools(t *testing.T) {
	needRoot(t)
	if !pyenvtest.PyPIReachable() {
		t.Skip("PyPI is unreachable: the tools cannot be fetched")
	}
	data := t.TempDir()
	envDir := pyenvtest.PyPIEnvDir(t)
	// Cold jails only: the plot's matplotlib starts in the run itself.
	srv := startServerEnv(t, data, pathWithout("uv", "ruff"), "--provision-tools=true", "--env-dir", envDir,
		"--warm-pool=false", "--fork-server=false", "--no-detect-imports")

	var h toolsHealth
	eventually(t, 3*time.Minute, "uv and ruff to be fetched", func() bool {
		h = getTools(t, srv.url)
		return h.UV.State == "ready" && h.Ruff.State == "ready"
	})
	for name, tool := range map[string]struct{ State, Source, Path string }{"uv": h.UV, "ruff": h.Ruff} {
		if tool.Source != "provisioned" || !strings.HasPrefix(tool.Path, filepath.Join(data, "tools")+"/") {
			t.Errorf("%s = %+v, want provisioned into %s/tools", name, tool, data)
		}
	}
	if h.Lint != "ready" || h.Installer != "uv" {
		t.Errorf("/health tools = %+v, want lint ready and installer uv", h)
	}
	if !strings.Contains(srv.logs.String(), "tool provisioned") {
		t.Errorf("no log line about the fetched tools:\n%s", srv.logs)
	}

	t.Run("lint reports bugs, not style", func(t *testing.T) {
		script := filepath.Join(t.TempDir(), "script.py")
		if err := os.WriteFile(script, []byte("import os\ndef f(x=[]):\n    print(x)\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := cli(t, srv.url, "", "lint", script)
		if r.code != 1 || !strings.Contains(r.stdout, "F401") || !strings.Contains(r.stdout, "B006") ||
			strings.Contains(r.stdout, "D103") || strings.Contains(r.stdout, "T201") {
			t.Fatalf("default profile: %+v", r)
		}
		r = cli(t, srv.url, "", "lint", "--profile", "strict", script)
		if r.code != 1 || !strings.Contains(r.stdout, "D103") || !strings.Contains(r.stdout, "T201") {
			t.Fatalf("strict profile: %+v", r)
		}
	})

	t.Run("a titled plot installed with uv prints no fontconfig error", func(t *testing.T) {
		code := "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n" +
			"plt.plot([1, 2, 3])\nplt.title('a title')\nplt.savefig('plot.png')\nprint('saved')\n"
		reqs := filepath.Join(t.TempDir(), "requirements.txt")
		if err := os.WriteFile(reqs, []byte("matplotlib\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := cli(t, srv.url, code, "run", "--json", "--requirements", reqs, "--timeout", "120")
		var res struct {
			Status, Stdout, Stderr, Reason, Error string
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if res.Status != "completed" || res.Stdout != "saved\n" {
			t.Fatalf("run: %+v\n%s", res, srv.logs)
		}
		if res.Stderr != "" {
			t.Errorf("stderr of a titled plot = %q, want nothing", res.Stderr)
		}
		records, _ := filepath.Glob(filepath.Join(envDir, "envs", "*", "pyexec-env.json"))
		usedUV := false
		for _, rec := range records {
			b, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			var env struct {
				Installer    string   `json:"installer"`
				Requirements []string `json:"requirements"`
			}
			if err := json.Unmarshal(b, &env); err != nil {
				t.Fatal(err)
			}
			usedUV = usedUV || (env.Installer == "uv" && strings.Contains(strings.Join(env.Requirements, " "), "matplotlib"))
		}
		if !usedUV {
			t.Errorf("no environment with matplotlib built by uv among %v", records)
		}
	})

	t.Run("the log has a line per execution and no NATS banner", func(t *testing.T) {
		logs := srv.logs.String()
		if !strings.Contains(logs, "msg=execution ") || !strings.Contains(logs, "status=completed") ||
			!strings.Contains(logs, "key=anonymous") {
			t.Errorf("no execution line in the log:\n%s", logs)
		}
		if strings.Contains(logs, "JETSTREAM") || strings.Contains(logs, "Starting nats-server") {
			t.Errorf("the NATS banner is logged at info:\n%s", logs)
		}
	})
}
