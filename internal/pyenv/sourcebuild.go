package pyenv

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// BuildJails prepares the jails that source builds run in;
// *sandbox.Manager implements it.
type BuildJails interface {
	Prepare(ctx context.Context, base sandbox.Base) (*sandbox.Jail, error)
	// PayloadOwner is the host uid and gid a jailed build writes as.
	PayloadOwner() (uid, gid int)
}

// caTarget is where the host's SSL_CERT_FILE appears in a build jail
// (its /etc is the jail's own).
const caTarget = "/run/pyexec/ca.pem"

// uvInJail is where a build jail sees uv.
const uvInJail = "/opt/pyexec/bin/uv"

// installJailed runs an installer that may build source distributions in
// a jail without network: the build directory tmp and the build cache are
// its only writable mounts, and its only way out is an HTTP proxy, opened
// inside its network namespace, that reaches the package index hosts and
// nothing else.
func (m *Environments) installJailed(ctx context.Context, in Interpreter, argv []string, tmp, cache string, progress func(string)) *runError {
	uid, gid := m.cfg.Jails.PayloadOwner()
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return &runError{err: err}
	}
	for _, d := range []string{tmp, cache} {
		if err := chownTree(d, uid, gid); err != nil {
			return &runError{err: fmt.Errorf("handing the build directory to the build jail: %w", err)}
		}
	}
	mounts := []sandbox.Mount{{Source: tmp, Writable: true}, {Source: cache, Writable: true}}
	for _, p := range in.Mounts {
		mounts = append(mounts, sandbox.Mount{Source: p})
	}
	if m.uv != "" && argv[0] == m.uv {
		// uv may live anywhere on the host (under /tmp too): the jail sees
		// it at a path of its own.
		mounts = append(mounts, sandbox.Mount{Source: m.uv, Target: uvInJail})
		argv = append([]string{uvInJail}, argv[1:]...)
	}
	for _, u := range append([]string{m.cfg.IndexURL}, m.cfg.ExtraIndexURLs...) {
		if p, err := url.Parse(u); err == nil && p.Scheme == "file" {
			mounts = append(mounts, sandbox.Mount{Source: filepath.Clean(p.Path)})
		}
	}
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "NO_COLOR=1",
		"UV_NO_CONFIG=1", "UV_PYTHON_DOWNLOADS=never", "PIP_CONFIG_FILE=/dev/null"}
	if ca, ok := os.LookupEnv("SSL_CERT_FILE"); ok && filepath.IsAbs(ca) {
		mounts = append(mounts, sandbox.Mount{Source: filepath.Clean(ca), Target: caTarget})
		env = append(env, "SSL_CERT_FILE="+caTarget, "PIP_CERT="+caTarget)
	}

	j, err := m.cfg.Jails.Prepare(ctx, sandbox.Base{Mounts: mounts})
	if err != nil {
		return &runError{err: fmt.Errorf("preparing the build jail: %w", err)}
	}
	defer j.Close()
	l, err := j.ListenInside("tcp", "127.0.0.1:0")
	if err != nil {
		return &runError{err: fmt.Errorf("opening the build jail's proxy: %w", err)}
	}
	proxy := &indexProxy{allowed: indexHosts(append([]string{m.cfg.IndexURL}, m.cfg.ExtraIndexURLs...)), log: m.log,
		refused:   func(what string) { progress("proxy refused " + what + ": not a package index host") },
		transport: &http.Transport{Proxy: nil, ForceAttemptHTTP2: false}}
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		proxy.serve(pctx, l)
	}()
	defer func() {
		stop()
		l.Close()
		wg.Wait()
		proxy.transport.CloseIdleConnections()
	}()
	addr := "http://" + l.Addr().String()
	env = append(env, "HTTP_PROXY="+addr, "HTTPS_PROXY="+addr, "http_proxy="+addr, "https_proxy="+addr, "NO_PROXY=", "no_proxy=")

	lines := newLineTail(progress)
	res, err := j.Run(ctx, sandbox.Spec{
		Argv: argv, Env: env, Dir: sandbox.WorkDir, Mounts: mounts, LiveOnly: true,
		Limits: sandbox.Limits{WallTime: m.cfg.InstallTimeout, CPUTime: m.cfg.InstallTimeout, MemoryBytes: 2 << 30,
			Pids: 512, CPUs: 2, WorkspaceBytes: 2 << 30, WorkspaceInodes: 1 << 20, OpenFiles: 4096,
			FileSizeBytes: 1 << 30},
	}, func(_ sandbox.Stream, p []byte) { lines.Write(p) })
	tail := lines.finish()
	if err == nil && res.Status != sandbox.StatusOK {
		err = fmt.Errorf("the build jail ended %s (%s), exit code %d", res.Status, res.Reason, res.ExitCode)
	}
	if cerr := chownTree(tmp, os.Geteuid(), os.Getegid()); cerr != nil && err == nil {
		err = fmt.Errorf("taking the environment back from the build jail: %w", cerr)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return &runError{err: err, output: tail}
	}
	return nil
}

// chownTree gives every file below dir (symlinks themselves) to uid:gid.
func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// validSourceBuildIndexes reports an index a build jail cannot use.
func validSourceBuildIndexes(urls []string) error {
	for _, u := range urls {
		p, err := url.Parse(u)
		if err != nil {
			return err
		}
		if p.Scheme == "file" {
			if err := MountableDir(filepath.Clean(p.Path)); err != nil {
				return fmt.Errorf("index %s cannot be mounted into a build jail: %w", u, err)
			}
		} else if _, _, err := net.SplitHostPort(hostPort(p)); err != nil || strings.TrimSpace(p.Host) == "" {
			return fmt.Errorf("index %s has no host", u)
		}
	}
	return nil
}
