package pyenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// outputTail is how many lines of installer output an InstallError keeps.
const outputTail = 40

// build installs set into a new environment: in a temporary directory
// that is renamed into place only when complete, so that an environment
// that exists is always whole. The caller holds the build lock of key.
func (m *Environments) build(ctx context.Context, in Interpreter, set Set, key string, progress func(string)) error {
	started := time.Now()
	if err := m.resolveUV(ctx); err != nil {
		return err
	}
	m.log.Info("building environment", "key", key, "python", in.Full, "requirements", set.Specs(), "installer", m.Installer())
	progress(fmt.Sprintf("installing %s with %s", strings.Join(set.Specs(), ", "), m.Installer()))
	tmp, venv, err := m.newVenv(ctx, in, set, key, progress)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	final := filepath.Join(envsDir(m.cfg), key)
	var notInstalled []string
	if err := m.install(ctx, in, venv, tmp, "all", set, progress); err != nil {
		opt := set.Optional()
		if len(opt) == 0 {
			return &InstallError{Requirements: set.Specs(), Output: err.output, Err: err.err}
		}
		// Optional requirements never fail a build: install the
		// required ones, then each optional one on its own.
		progress("retrying without the optional requirements")
		if err := m.install(ctx, in, venv, tmp, "required", set.Required(), progress); err != nil {
			return &InstallError{Requirements: set.Required().Specs(), Output: err.output, Err: err.err}
		}
		for _, r := range opt {
			if err := m.install(ctx, in, venv, tmp, "optional-"+r.Name, Set{r}, progress); err != nil {
				notInstalled = append(notInstalled, r.Spec)
				progress(fmt.Sprintf("optional requirement %s was not installed", r.Spec))
			}
		}
	}
	if m.uv == "" {
		if err := fixShebangs(venv, final); err != nil {
			return fmt.Errorf("relocating scripts: %w", err)
		}
	}
	installed, size, err := finishVenv(venv)
	if err != nil {
		return err
	}
	env := Env{Python: in.Full, PythonPath: in.Path, Requirements: set.Specs(), Installed: installed,
		NotInstalled: notInstalled, Installer: m.Installer(), SizeBytes: size, Created: time.Now().UTC(),
		BuildDuration: time.Since(started).Round(time.Millisecond).String()}
	if err := m.placeVenv(venv, final, env); err != nil {
		return err
	}
	progress(fmt.Sprintf("environment ready in %s", env.BuildDuration))
	m.log.Info("built environment", "key", key, "size_bytes", size, "duration", env.BuildDuration)
	return nil
}

// newVenv creates a virtualenv of in for the build of set into key, at
// venv in the fresh build directory tmp, which the caller removes.
func (m *Environments) newVenv(ctx context.Context, in Interpreter, set Set, key string, progress func(string)) (tmp, venv string, err error) {
	tmp, err = os.MkdirTemp(tmpDir(m.cfg), key+"-")
	if err != nil {
		return "", "", fmt.Errorf("creating a build directory: %w", err)
	}
	venv = filepath.Join(tmp, "env")
	if rerr := m.run(ctx, m.venvCmd(in, venv), progress); rerr != nil {
		os.RemoveAll(tmp)
		return "", "", &InstallError{Requirements: set.Specs(), Output: rerr.output, Err: fmt.Errorf("creating the virtualenv: %w", rerr.err)}
	}
	return tmp, venv, nil
}

// finishVenv readies a virtualenv whose installs are done for its record:
// it lists the distributions installed in it, lets the payload user read
// all of it and measures the disk space it takes.
func finishVenv(venv string) (installed []string, size int64, err error) {
	if installed, err = installedNames(venv); err != nil {
		return nil, 0, fmt.Errorf("listing installed distributions: %w", err)
	}
	if err := makeReadable(venv); err != nil {
		return nil, 0, fmt.Errorf("setting permissions: %w", err)
	}
	if size, err = DiskUsage(venv, false); err != nil {
		return nil, 0, fmt.Errorf("measuring the environment: %w", err)
	}
	return installed, size, nil
}

// placeVenv writes env as the record of the finished virtualenv venv and
// renames it to final, where it is whole from the first moment on.
func (m *Environments) placeVenv(venv, final string, env Env) error {
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(venv, metaFile), b, 0o644); err != nil {
		return fmt.Errorf("writing the environment record: %w", err)
	}
	if err := os.Rename(venv, final); err != nil {
		return fmt.Errorf("moving the environment into place: %w", err)
	}
	m.builds.Add(1)
	return nil
}

// venvCmd creates the virtualenv. uv's --relocatable makes its scripts
// find the interpreter relative to themselves, so the rename into place
// keeps them working.
func (m *Environments) venvCmd(in Interpreter, venv string) []string {
	if m.uv != "" {
		return []string{m.uv, "venv", "--no-config", "--no-project", "--no-python-downloads", "--relocatable",
			"--quiet", "--cache-dir", m.cacheDir("uv"), "--python", in.Path, venv}
	}
	return []string{in.Path, "-m", "venv", venv}
}

// install installs set into venv. By default it installs wheels only: no
// source distribution is ever built, so no code of a package runs while
// installing it. With source builds allowed, it runs in a build jail
// instead (see installJailed).
func (m *Environments) install(ctx context.Context, in Interpreter, venv, tmp, name string, set Set, progress func(string)) *runError {
	reqFile := filepath.Join(tmp, name+".txt")
	if err := os.WriteFile(reqFile, []byte(strings.Join(set.Specs(), "\n")+"\n"), 0o600); err != nil {
		return &runError{err: err}
	}
	py := filepath.Join(venv, "bin", "python")
	source := m.cfg.AllowSourceBuilds
	// Source builds get their own cache: what a jailed build writes there
	// is never trusted by a build on the host.
	cache := m.cacheDir(m.Installer())
	if source {
		cache = m.cacheDir(m.Installer() + "-build")
	}
	var argv []string
	if m.uv != "" {
		argv = append([]string{m.uv, "pip", "install"}, m.uvArgs(py)...)
	} else {
		argv = []string{py, "-m", "pip", "install", "--isolated", "--no-input", "--disable-pip-version-check",
			"--cache-dir", cache, "--index-url", m.cfg.IndexURL}
		if !source {
			argv = append(argv, "--only-binary", ":all:")
		}
		for _, u := range m.cfg.ExtraIndexURLs {
			argv = append(argv, "--extra-index-url", u)
		}
		for _, h := range m.cfg.TrustedHosts {
			argv = append(argv, "--trusted-host", h)
		}
	}
	argv = append(argv, "-r", reqFile)
	if source {
		return m.installJailed(ctx, in, argv, tmp, cache, progress)
	}
	if err := m.run(ctx, argv, progress); err != nil {
		err.err = wheelsOnly(err)
		return err
	}
	return nil
}

// uvArgs are the options of every uv pip command on the environment of
// py: no configuration files, the shared cache, the operator's indexes,
// and wheels only unless source builds are allowed.
func (m *Environments) uvArgs(py string) []string {
	argv := []string{"--no-config", "--no-progress", "--cache-dir", m.cacheDir("uv"), "--python", py, "--index-url", m.cfg.IndexURL}
	if m.cfg.AllowSourceBuilds {
		argv[3] = m.cacheDir("uv-build")
	} else {
		argv = append(argv, "--no-build")
	}
	for _, u := range m.cfg.ExtraIndexURLs {
		argv = append(argv, "--extra-index-url", u)
	}
	for _, h := range m.cfg.TrustedHosts {
		argv = append(argv, "--allow-insecure-host", h)
	}
	return argv
}

// wheelsOnly adds the hint about source builds to a failed wheels-only
// install, when what failed was the lack of a wheel, and only then: a
// missing distribution or a version conflict has nothing to do with it.
func wheelsOnly(err *runError) error {
	for _, sign := range []string{"no usable wheels", "building from source is disabled", "no wheels with a matching"} {
		if strings.Contains(err.output, sign) {
			return fmt.Errorf("%w (wheels only: source builds are off, see PYEXEC_ALLOW_SOURCE_BUILDS)", err.err)
		}
	}
	return err.err
}

func (m *Environments) cacheDir(tool string) string { return filepath.Join(m.cfg.Dir, "cache", tool) }

// runError is a failed installer command with the tail of its output.
type runError struct {
	err    error
	output string
}

// run runs argv with a clean environment, streaming its output lines to
// progress, and returns the tail of the output when it fails.
func (m *Environments) run(ctx context.Context, argv []string, progress func(string)) *runError {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = m.toolEnv()
	cmd.Dir = m.cfg.Dir
	// Its own process group, killed whole on cancel (Close at shutdown);
	// and killed if the server dies without one (kill -9).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	lines := newLineTail(progress)
	cmd.Stdout, cmd.Stderr = lines, lines
	err := cmd.Run()
	tail := lines.finish()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return &runError{err: err, output: tail}
}

// lineTail splits an installer's output into lines for progress and keeps
// the last outputTail of them.
type lineTail struct {
	*io.PipeWriter
	wg   sync.WaitGroup
	tail []string
}

func newLineTail(progress func(string)) *lineTail {
	pr, pw := io.Pipe()
	l := &lineTail{PipeWriter: pw}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), " \r")
			if line == "" {
				continue
			}
			progress(line)
			l.tail = append(l.tail, line)
			if len(l.tail) > outputTail {
				l.tail = l.tail[1:]
			}
		}
		io.Copy(io.Discard, pr) // a line over 1 MiB: drain the rest
	}()
	return l
}

// finish ends the output and returns its tail.
func (l *lineTail) finish() string {
	l.Close()
	l.wg.Wait()
	return strings.Join(l.tail, "\n")
}

// toolEnv is the installers' environment: nothing of the server's but
// what reaching an index needs (proxies, a CA bundle).
func (m *Environments) toolEnv() []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + m.cfg.Dir, "LANG=C.UTF-8",
		"NO_COLOR=1", "UV_NO_CONFIG=1", "PIP_CONFIG_FILE=/dev/null"}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "PIP_CERT", "REQUESTS_CA_BUNDLE"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	// pip trusts only its own bundle unless told otherwise: give it the CA
	// bundle the host's TLS uses (a site's inspecting proxy, say).
	if v, ok := os.LookupEnv("SSL_CERT_FILE"); ok && !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "PIP_CERT=") }) {
		env = append(env, "PIP_CERT="+v)
	}
	return env
}

// installedNames lists the normalised names of the distributions in the
// virtualenv's site-packages.
func installedNames(venv string) ([]string, error) {
	dists, err := installedDists(venv)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(dists))
	for n := range dists {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// installedDists maps the normalised names of the distributions in the
// virtualenv's site-packages to their versions, read from the names of
// their .dist-info directories (name-version.dist-info).
func installedDists(venv string) (map[string]string, error) {
	matches, err := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages", "*.dist-info"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range matches {
		base := strings.TrimSuffix(filepath.Base(m), ".dist-info")
		name, version, _ := strings.Cut(base, "-")
		if n := NormalizeName(name); out[n] == "" {
			out[n] = version
		}
	}
	return out, nil
}

// fixShebangs points the scripts pip wrote in the build directory at the
// environment's final place.
func fixShebangs(venv, final string) error {
	bin := filepath.Join(venv, "bin")
	entries, err := os.ReadDir(bin)
	if err != nil {
		return err
	}
	prefix := []byte("#!" + venv + "/")
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(bin, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(b, prefix) {
			continue
		}
		b = append([]byte("#!"+final+"/"), b[len(prefix):]...)
		info, err := e.Info()
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, b, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// makeReadable lets the unprivileged payload user read every file and
// enter every directory of the environment.
func makeReadable(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := info.Mode().Perm() | 0o044
		if d.IsDir() || info.Mode().Perm()&0o100 != 0 {
			want |= 0o011
		}
		if want != info.Mode().Perm() {
			return os.Chmod(p, want)
		}
		return nil
	})
}

// DiskUsage is the disk space a directory tree takes. With unsharedOnly
// it counts only the directories and the files that have no other link
// (uv hard-links files from its download cache when it can).
func DiskUsage(dir string, unsharedOnly bool) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		switch {
		case !ok && !unsharedOnly:
			total += info.Size()
		case ok && (!unsharedOnly || d.IsDir() || st.Nlink == 1):
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err
}
