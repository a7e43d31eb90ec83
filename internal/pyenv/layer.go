package pyenv

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// A layer is an environment for a set that the base environment does not
// cover but can carry: a virtualenv of the same interpreter whose
// site-packages holds only the distributions the set adds to the base,
// plus a .pth file that puts the base environment's site-packages after
// its own on sys.path. It is resolved with the base's installed versions
// as constraints, so the two never disagree; a set that needs other
// versions of the base's distributions gets a whole environment instead.
// Jails mount both directories read-only, and a layer's lease holds its
// base's use lock, so the base cannot be evicted under it.

// layerPth is the file in a layer's site-packages that adds the base's.
const layerPth = "_pyexec_base.pth"

// errNotLayered says a set gets a whole environment rather than a layer.
var errNotLayered = errors.New("not layered over the base environment")

// layerKey is the content address of the layer of set over base. The
// base's creation time is part of it: a rebuilt base (other versions)
// never serves an old layer.
func layerKey(base Env, set Set) string {
	h := sha256.New()
	fmt.Fprintf(h, "pyexec-layer-v1\n%s\n%s\n%s", base.Key, base.Created.UTC().Format(time.RFC3339Nano), set.canonical())
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// acquireLayer leases the layer of set over the base environment of in,
// building it if needed. It returns errNotLayered when set should get a
// whole environment instead: layering needs uv and wheel-only installs,
// a built base, and a set that fits the base's versions; a whole
// environment of set that exists already is used as it is.
func (m *Environments) acquireLayer(ctx context.Context, in Interpreter, set Set, progress func(string)) (*Lease, error) {
	if err := m.resolveUV(ctx); err != nil {
		return nil, err
	}
	if m.uv == "" || m.cfg.AllowSourceBuilds || len(m.base) == 0 {
		return nil, errNotLayered
	}
	if _, err := m.readEnv(m.Key(in, set)); err == nil {
		return nil, errNotLayered
	}
	baseKey := m.Key(in, m.base)
	if _, err := m.readEnv(baseKey); err != nil {
		return nil, errNotLayered
	}
	baseUse, err := lockWait(ctx, filepath.Join(lockDir(m.cfg), baseKey+".use"), false)
	if err != nil {
		return nil, err
	}
	base, err := m.readEnv(baseKey)
	if err != nil { // pruned while this waited
		baseUse.unlock()
		return nil, errNotLayered
	}
	key := layerKey(base, set)
	use, err := lockWait(ctx, filepath.Join(lockDir(m.cfg), key+".use"), false)
	if err != nil {
		baseUse.unlock()
		return nil, err
	}
	l, err := m.leaseBuilt(ctx, key, use, baseUse, func() *flight {
		return m.startBuild(key, func(ctx context.Context, progress func(string)) error {
			return m.buildLayer(ctx, in, set, base, key, progress)
		})
	}, progress)
	if err != nil {
		use.unlock()
		baseUse.unlock()
	}
	return l, err
}

// buildLayer builds the layer of set over base into key. The caller
// holds the build lock of key and a use lock of base.
func (m *Environments) buildLayer(ctx context.Context, in Interpreter, set Set, base Env, key string, progress func(string)) error {
	started := time.Now()
	m.log.Info("building environment layer", "key", key, "base", base.Key, "python", in.Full, "requirements", set.Specs())
	progress(fmt.Sprintf("installing %s over the base environment with uv", strings.Join(set.Specs(), ", ")))
	tmp, venv, err := m.newVenv(ctx, in, set, key, progress)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	final := filepath.Join(envsDir(m.cfg), key)
	own, err := m.resolveOverBase(ctx, set, base, venv, tmp, progress)
	if err != nil {
		return err
	}
	if len(own) > 0 {
		ownFile := filepath.Join(tmp, "own.txt")
		if err := os.WriteFile(ownFile, []byte(strings.Join(own, "\n")+"\n"), 0o600); err != nil {
			return err
		}
		argv := append([]string{m.uv, "pip", "install"}, m.uvArgs(filepath.Join(venv, "bin", "python"))...)
		argv = append(argv, "--no-deps", "-r", ownFile)
		if err := m.run(ctx, argv, progress); err != nil {
			return &InstallError{Requirements: set.Specs(), Output: err.output, Err: wheelsOnly(err)}
		}
	}
	if err := linkBase(venv, base.Dir); err != nil {
		return fmt.Errorf("linking the base environment: %w", err)
	}
	mine, size, err := finishVenv(venv)
	if err != nil {
		return err
	}
	installed := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(base.Installed), mine...))))
	// Its record lists what it adds: the set less the base's own entries.
	adds := slices.DeleteFunc(set.Specs(), func(spec string) bool {
		return slices.ContainsFunc(m.base, func(b Requirement) bool { return b.Spec == spec })
	})
	env := Env{Python: in.Full, PythonPath: in.Path, Requirements: adds, Installed: installed,
		Installer: m.Installer(), SizeBytes: size, Created: time.Now().UTC(), BaseKey: base.Key,
		BuildDuration: time.Since(started).Round(time.Millisecond).String()}
	if err := m.placeVenv(venv, final, env); err != nil {
		return err
	}
	progress(fmt.Sprintf("environment ready in %s (%d package(s) over the base environment)", env.BuildDuration, len(own)))
	m.log.Info("built environment layer", "key", key, "size_bytes", size, "duration", env.BuildDuration, "added", own)
	return nil
}

// resolveOverBase resolves set with the base's installed versions as
// constraints and returns the pinned distributions the base lacks. When
// that resolution fails it tells the set's own failure (an InstallError
// with the resolver's message) from a conflict with the base's versions
// (errNotLayered) by resolving set once more on its own.
func (m *Environments) resolveOverBase(ctx context.Context, set Set, base Env, venv, tmp string, progress func(string)) ([]string, error) {
	dists, err := installedDists(base.Dir)
	if err != nil {
		return nil, fmt.Errorf("reading the base environment: %w", err)
	}
	var cons []string
	for n, v := range dists {
		cons = append(cons, n+"=="+v)
	}
	sort.Strings(cons)
	reqFile, consFile, pinFile := filepath.Join(tmp, "layer.in"), filepath.Join(tmp, "base-constraints.txt"), filepath.Join(tmp, "layer.txt")
	if err := os.WriteFile(reqFile, []byte(strings.Join(set.Specs(), "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(consFile, []byte(strings.Join(cons, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	compile := append([]string{m.uv, "pip", "compile"}, m.uvArgs(filepath.Join(venv, "bin", "python"))...)
	compile = append(compile, "--quiet", "--no-header", "--no-annotate", "-o", pinFile, reqFile)
	rerr := m.run(ctx, append(slices.Clone(compile), "-c", consFile), progress)
	if rerr != nil {
		if ctx.Err() != nil || len(set.Optional()) > 0 {
			// Optional requirements are tried one by one, which a whole build does.
			return nil, errNotLayered
		}
		if alone := m.run(ctx, compile, func(string) {}); alone != nil {
			return nil, &InstallError{Requirements: set.Specs(), Output: alone.output, Err: wheelsOnly(alone)}
		}
		progress("these requirements need other versions of the base environment's packages: building a separate environment")
		return nil, errNotLayered
	}
	pins, err := readPins(pinFile)
	if err != nil {
		return nil, err
	}
	var own []string
	for _, p := range pins {
		name, version, _ := strings.Cut(p, "==")
		if dists[NormalizeName(name)] != version {
			own = append(own, p)
		}
	}
	return own, nil
}

// readPins reads the name==version lines of a compiled requirements file.
func readPins(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line, _, _ = strings.Cut(line, ";") // markers: already evaluated for this interpreter
		line = strings.TrimSpace(line)
		if !strings.Contains(line, "==") {
			return nil, fmt.Errorf("unexpected line in the resolution: %q", line)
		}
		out = append(out, line)
	}
	return out, sc.Err()
}

// linkBase writes the .pth file that adds the base environment's
// site-packages (at its final place baseDir) after the layer's own. It
// goes through site.addsitedir so that the base's own .pth files work.
func linkBase(venv, baseDir string) error {
	own, err := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages"))
	if err != nil || len(own) != 1 {
		return fmt.Errorf("finding the layer's site-packages: %d found (%v)", len(own), err)
	}
	rel, err := filepath.Rel(venv, own[0])
	if err != nil {
		return err
	}
	baseSite := filepath.Join(baseDir, rel)
	if _, err := os.Stat(baseSite); err != nil {
		return err
	}
	line := fmt.Sprintf("import site; site.addsitedir(%q)\n", baseSite)
	return os.WriteFile(filepath.Join(own[0], layerPth), []byte(line), 0o644)
}
