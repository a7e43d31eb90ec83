package provision

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrUnsupported: no wheel is pinned for this operating system and
// architecture.
var ErrUnsupported = errors.New("no pinned wheel for this platform")

// ErrDigest: the index served a file whose SHA-256 is not the pinned one.
var ErrDigest = errors.New("the downloaded wheel does not match its pinned SHA-256")

// ErrNotOnIndex: no configured index lists the pinned wheel.
var ErrNotOnIndex = errors.New("the pinned wheel is on no configured index")

// Config configures a Provisioner.
type Config struct {
	// Dir keeps the tools, each as Dir/NAME-VERSION/NAME.
	Dir string
	// IndexURLs are PEP 503 simple indexes (http, https or file), searched
	// in order for the pinned wheel.
	IndexURLs []string
	// TrustedHosts are index hosts whose TLS certificate is not verified
	// (the pinned digest still is).
	TrustedHosts []string
	// Timeout bounds the fetch of one tool. Default 5 minutes.
	Timeout time.Duration
	// Logger receives one line per fetch; nil discards.
	Logger *slog.Logger
}

// Provisioner fetches pinned tools into its directory. Start runs a
// fetch in the background; Close stops those in progress and waits.
type Provisioner struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Provisioner for cfg.
func New(cfg Config) *Provisioner {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Provisioner{cfg: cfg, log: log, ctx: ctx, cancel: cancel}
}

// Close stops the fetches in progress and waits for them.
func (p *Provisioner) Close() {
	p.cancel()
	p.wg.Wait()
}

// Path is where t lives once fetched.
func (p *Provisioner) Path(t Tool) string { return pathIn(p.cfg.Dir, t) }

func pathIn(dir string, t Tool) string { return filepath.Join(dir, t.Name+"-"+t.Version, t.Name) }

// Installed returns t's path when it has been fetched before.
func (p *Provisioner) Installed(t Tool) (string, bool) { return Installed(p.cfg.Dir, t) }

// Installed returns t's path when it has been fetched into dir before.
func Installed(dir string, t Tool) (string, bool) {
	path := pathIn(dir, t)
	st, err := os.Stat(path)
	return path, err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// Fetch returns t's path, downloading, verifying and unpacking it first
// when it is not there yet.
func (p *Provisioner) Fetch(ctx context.Context, t Tool) (string, error) {
	if path, ok := p.Installed(t); ok {
		return path, nil
	}
	w, ok := t.wheel()
	if !ok {
		return "", fmt.Errorf("%s %s: %w", t.Name, t.Version, ErrUnsupported)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	started := time.Now()
	if err := os.MkdirAll(p.cfg.Dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the tools directory: %w", err)
	}
	tmp, err := os.MkdirTemp(p.cfg.Dir, ".fetch-"+t.Name+"-")
	if err != nil {
		return "", fmt.Errorf("creating a download directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	src, err := p.download(ctx, t, w, filepath.Join(tmp, w.File))
	if err != nil {
		return "", fmt.Errorf("fetching %s %s: %w", t.Name, t.Version, err)
	}
	unpacked := filepath.Join(tmp, "out")
	if err := unpack(filepath.Join(tmp, w.File), t.member(), filepath.Join(unpacked, t.Name)); err != nil {
		return "", fmt.Errorf("unpacking %s: %w", w.File, err)
	}
	if err := checkRuns(ctx, filepath.Join(unpacked, t.Name), t.Version); err != nil {
		return "", fmt.Errorf("%s %s does not run on this host: %w", t.Name, t.Version, err)
	}
	final := filepath.Dir(p.Path(t))
	if err := os.Rename(unpacked, final); err != nil {
		if path, ok := p.Installed(t); ok { // another process got there first
			return path, nil
		}
		return "", fmt.Errorf("moving %s into place: %w", t.Name, err)
	}
	// The jail runs the tools as an unprivileged user.
	if err := os.Chmod(final, 0o755); err != nil {
		return "", err
	}
	p.log.Info("tool provisioned", "tool", t.Name, "version", t.Version, "path", p.Path(t), "from", src,
		"duration", time.Since(started).Round(time.Millisecond).String())
	return p.Path(t), nil
}

// checkRuns runs `bin --version` and expects version in its output: a
// data dir mounted noexec, or a binary for another libc, fails here rather
// than on the first request.
func checkRuns(ctx context.Context, bin, version string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "NO_COLOR=1"}
	// Its own process group: Ctrl-C in the terminal of a server started
	// by hand must not reach it (the server stops its work itself).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	if !strings.Contains(string(out), version) {
		return fmt.Errorf("--version printed %q, want version %s", strings.TrimSpace(string(out)), version)
	}
	return nil
}

// Job is a fetch running in the background.
type Job struct {
	Tool Tool
	done chan struct{}
	path string
	err  error
}

// Start fetches t in the background; the Job tells when it is there.
func (p *Provisioner) Start(t Tool) *Job {
	j := &Job{Tool: t, done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(j.done)
		j.path, j.err = p.Fetch(p.ctx, t)
		if j.err != nil && p.ctx.Err() == nil {
			p.log.Warn("provisioning a tool failed", "tool", t.Name, "version", t.Version, "err", j.err)
		}
	}()
	return j
}

// Wait returns the fetched path, or why there is none, once the fetch has
// ended, or ctx's error first.
func (j *Job) Wait(ctx context.Context) (string, error) {
	select {
	case <-j.done:
		return j.path, j.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Result returns the fetch's outcome; done is false while it runs.
func (j *Job) Result() (path string, err error, done bool) {
	select {
	case <-j.done:
		return j.path, j.err, true
	default:
		return "", nil, false
	}
}

// Done is closed when the fetch has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// httpClient returns the client for u: the environment's proxy settings,
// and no certificate check for a trusted host.
func (p *Provisioner) httpClient(u *url.URL) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if slices.Contains(p.cfg.TrustedHosts, u.Host) || slices.Contains(p.cfg.TrustedHosts, u.Hostname()) {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // #nosec G402 -- the operator's choice; the digest is still checked
	}
	return &http.Client{Transport: tr}
}
