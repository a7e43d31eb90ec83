// Command envs measures what dependency environments cost, as ratios
// against a baseline measured in the same run:
//
//   - selection: a run in a cached environment (lease it, mount it, start
//     its interpreter) against a run of the bare interpreter, both in the
//     real jail. The goal is an overhead of at most 5 ms.
//   - cold install: building a new environment through pyexec against
//     running uv directly on the same set with the same download cache.
//     The goal is at most 1.2×.
//   - layer: "base + one package" (-extra) built as a layer over the base
//     environment (-base) against a whole environment of the same set:
//     bytes on disk and build time, both with a warm download cache.
//
// Run it as root on a host that can build jails:
//
//	go run ./bench/envs -uv $(which uv) -set requests,pyyaml
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/sandbox"
)

func main() {
	if sandbox.IsInit() {
		os.Exit(sandbox.Init())
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/envs:", err)
		os.Exit(1)
	}
}

type options struct {
	uv, index, set, python, dir string
	base, extra                 string
	runs, installs              int
	only                        string
}

func run() error {
	var o options
	flag.StringVar(&o.uv, "uv", os.Getenv("PYEXEC_UV"), "uv binary (default $PYEXEC_UV, else uv on $PATH)")
	flag.StringVar(&o.index, "index", "https://pypi.org/simple", "package index")
	flag.StringVar(&o.set, "set", "requests,pyyaml", "requirement set, comma separated")
	flag.StringVar(&o.python, "python", "", "Python version (default: the host's default)")
	flag.StringVar(&o.dir, "dir", "/var/tmp", "where to create the scratch environment directory (not under /tmp)")
	flag.IntVar(&o.runs, "runs", 30, "jail runs per variant for the selection benchmark")
	flag.IntVar(&o.installs, "installs", 3, "cold installs per variant")
	flag.StringVar(&o.base, "base", strings.Join(pyenv.DefaultBasePackages, ","), "base environment of the layer benchmark, comma separated")
	flag.StringVar(&o.extra, "extra", "tomli", "the one package the layer benchmark adds to the base")
	flag.StringVar(&o.only, "only", "", "run one benchmark: cold, selection or layer (default: all)")
	flag.Parse()

	ctx := context.Background()
	uv, err := pyenv.FindTool("uv", o.uv)
	if err != nil {
		return err
	}
	reqs, err := pyenv.ParseBaseList(o.set)
	if err != nil || len(reqs) == 0 {
		return fmt.Errorf("-set: %v", err)
	}
	var parsed []pyenv.Requirement
	for _, r := range reqs {
		req, err := pyenv.ParseRequirement(r, pyenv.FromRequest)
		if err != nil {
			return err
		}
		parsed = append(parsed, req)
	}
	set := pyenv.Merge(parsed)
	pythons, err := pyenv.Discover(ctx, pyenv.OptionsFromEnv(os.Getenv))
	if err != nil {
		return err
	}
	in, err := pythons.Lookup(o.python)
	if err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(o.dir, "pyexec-bench-envs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if err := os.Chmod(scratch, 0o755); err != nil {
		return err
	}
	fmt.Printf("Python %s, uv %s, set %s, index %s\n", in.Full, uv, strings.Join(set.Specs(), " "), o.index)

	if o.only == "" || o.only == "cold" || o.only == "selection" {
		direct, cold, err := coldInstall(ctx, o, uv, in, set, scratch)
		if err != nil {
			return err
		}
		fmt.Printf("cold install: uv directly %s, pyexec %s (median of %d) → ratio %.2f× (goal ≤ 1.20×)\n",
			direct.Round(time.Millisecond), cold.Round(time.Millisecond), o.installs, float64(cold)/float64(direct))
	}
	if o.only == "" || o.only == "selection" {
		bare, cached, lease, err := selection(ctx, o, uv, in, set, scratch)
		if err != nil {
			return err
		}
		fmt.Printf("selection: bare run %s, run in the cached environment %s (median of %d; lease %s) → +%.1f ms, ratio %.2f× (goal ≤ +5 ms)\n",
			bare.Round(10*time.Microsecond), cached.Round(10*time.Microsecond), o.runs, lease.Round(time.Microsecond),
			float64(cached-bare)/float64(time.Millisecond), float64(cached)/float64(bare))
	}
	if o.only == "" || o.only == "layer" {
		return layerBench(ctx, o, uv, in, scratch)
	}
	return nil
}

// coldInstall times, alternately, uv run directly and a pyexec build of
// the same set into new directories sharing one download cache (warmed
// first, so that neither measures the network).
func coldInstall(ctx context.Context, o options, uv string, in pyenv.Interpreter, set pyenv.Set, scratch string) (time.Duration, time.Duration, error) {
	cache := filepath.Join(scratch, "shared-cache")
	reqFile := filepath.Join(scratch, "requirements.txt")
	if err := os.WriteFile(reqFile, []byte(strings.Join(set.Specs(), "\n")+"\n"), 0o644); err != nil {
		return 0, 0, err
	}
	directOnce := func(i int) (time.Duration, error) {
		venv := filepath.Join(scratch, fmt.Sprintf("direct-%d", i))
		start := time.Now()
		for _, argv := range [][]string{
			{uv, "venv", "--no-config", "--quiet", "--cache-dir", cache, "--python", in.Path, venv},
			{uv, "pip", "install", "--no-config", "--quiet", "--no-build", "--cache-dir", cache, "--python", filepath.Join(venv, "bin", "python"),
				"--index-url", o.index, "-r", reqFile},
		} {
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Env = toolEnv(scratch)
			if out, err := cmd.CombinedOutput(); err != nil {
				return 0, fmt.Errorf("%s: %w\n%s", strings.Join(argv[:3], " "), err, out)
			}
		}
		return time.Since(start), nil
	}
	if _, err := directOnce(-1); err != nil { // warm the cache
		return 0, 0, err
	}
	var directs, colds []time.Duration
	for i := range o.installs {
		d, err := directOnce(i)
		if err != nil {
			return 0, 0, err
		}
		directs = append(directs, d)
		dir := filepath.Join(scratch, fmt.Sprintf("pyexec-%d", i))
		if err := os.MkdirAll(filepath.Join(dir, "cache"), 0o755); err != nil {
			return 0, 0, err
		}
		if err := os.Symlink(cache, filepath.Join(dir, "cache", "uv")); err != nil {
			return 0, 0, err
		}
		envs, err := pyenv.NewEnvironments(pyenv.EnvConfig{Dir: dir, UV: uv, IndexURL: o.index, Base: []string{}})
		if err != nil {
			return 0, 0, err
		}
		start := time.Now()
		l, err := envs.Acquire(ctx, in, set, nil)
		colds = append(colds, time.Since(start))
		if err != nil {
			envs.Close()
			return 0, 0, err
		}
		l.Release()
		envs.Close()
	}
	return median(directs), median(colds), nil
}

// selection times jail runs of `python -c pass`: with the bare
// interpreter, and with a lease of an already built environment mounted.
func selection(ctx context.Context, o options, uv string, in pyenv.Interpreter, set pyenv.Set, scratch string) (bare, cached, lease time.Duration, err error) {
	jails, err := sandbox.New(sandbox.Config{})
	if err != nil {
		return 0, 0, 0, err
	}
	envs, err := pyenv.NewEnvironments(pyenv.EnvConfig{Dir: filepath.Join(scratch, "pyexec-0"), UV: uv, IndexURL: o.index, Base: []string{}})
	if err != nil {
		return 0, 0, 0, err
	}
	defer envs.Close()
	if l, err := envs.Acquire(ctx, in, set, nil); err != nil { // built by coldInstall already
		return 0, 0, 0, err
	} else {
		l.Release()
	}
	mounts := func(extra ...string) []sandbox.Mount {
		var ms []sandbox.Mount
		for _, m := range slices.Concat(in.Mounts, extra) {
			ms = append(ms, sandbox.Mount{Source: m})
		}
		return ms
	}
	jailRun := func(python string, ms []sandbox.Mount) error {
		res, err := jails.Run(ctx, sandbox.Spec{Argv: []string{python, "-c", "pass"}, Env: []string{"PATH=/usr/bin:/bin"},
			Dir: sandbox.WorkDir, Mounts: ms, Limits: sandbox.Limits{WallTime: 20 * time.Second, MemoryBytes: 256 << 20}}, nil)
		if err != nil {
			return err
		}
		if res.Status != sandbox.StatusOK || res.ExitCode != 0 {
			return fmt.Errorf("jail run ended %s (%s) exit %d: %s", res.Status, res.Reason, res.ExitCode, res.Stderr)
		}
		return nil
	}
	var bares, cacheds, leases []time.Duration
	for i := range o.runs + 2 { // two warm-up rounds
		start := time.Now()
		if err := jailRun(in.Path, mounts()); err != nil {
			return 0, 0, 0, err
		}
		b := time.Since(start)
		start = time.Now()
		l, err := envs.Acquire(ctx, in, set, nil)
		if err != nil {
			return 0, 0, 0, err
		}
		ld := time.Since(start)
		err = jailRun(l.Python(), mounts(l.Dirs()...))
		c := time.Since(start)
		l.Release()
		if err != nil {
			return 0, 0, 0, err
		}
		if i >= 2 {
			bares, cacheds, leases = append(bares, b), append(cacheds, c), append(leases, ld)
		}
	}
	if envs.Stats().Builds != 0 {
		return 0, 0, 0, errors.New("the selection benchmark built an environment: the cache was not used")
	}
	return median(bares), median(cacheds), median(leases), nil
}

// toolEnv is the environment pyexec gives uv: a clean one plus what
// reaching an index needs (proxies, CA bundle).
func toolEnv(home string) []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8", "NO_COLOR=1", "UV_NO_CONFIG=1"}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
