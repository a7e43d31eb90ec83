package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv"
)

// layerBench builds "base + one package" both ways with one warm download
// cache: as a whole environment (what a set the base does not cover cost
// before layers) and as a layer over the base environment; it prints the
// bytes on disk and the build times.
func layerBench(ctx context.Context, o options, uv string, in pyenv.Interpreter, scratch string) error {
	baseList, err := pyenv.ParseBaseList(o.base)
	if err != nil || len(baseList) == 0 {
		return fmt.Errorf("-base: %v", err)
	}
	extra, err := pyenv.ParseRequirement(o.extra, pyenv.FromRequest)
	if err != nil {
		return fmt.Errorf("-extra: %w", err)
	}
	var reqs []pyenv.Requirement
	for _, b := range baseList {
		r, err := pyenv.ParseRequirement(b, pyenv.FromProject)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	set := pyenv.Merge([]pyenv.Requirement{extra}, reqs)
	cache := filepath.Join(scratch, "layer-cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	// newEnvs opens an environment directory of its own that shares the
	// download cache.
	n := 0
	newEnvs := func(base []string) (*pyenv.Environments, error) {
		n++
		dir := filepath.Join(scratch, fmt.Sprintf("layer-%d", n))
		if err := os.MkdirAll(filepath.Join(dir, "cache"), 0o755); err != nil {
			return nil, err
		}
		if err := os.Symlink(cache, filepath.Join(dir, "cache", "uv")); err != nil {
			return nil, err
		}
		return pyenv.NewEnvironments(pyenv.EnvConfig{Dir: dir, UV: uv, IndexURL: o.index, Base: base})
	}
	build := func(envs *pyenv.Environments) (time.Duration, pyenv.Env, error) {
		start := time.Now()
		l, err := envs.Acquire(ctx, in, set, nil)
		if err != nil {
			return 0, pyenv.Env{}, err
		}
		d := time.Since(start)
		l.Release()
		return d, l.Env, nil
	}

	// The first whole build fills the download cache; it is not counted.
	var wholes, layers []time.Duration
	var whole, layer pyenv.Env
	for i := range o.installs + 1 {
		envs, err := newEnvs([]string{})
		if err != nil {
			return err
		}
		d, env, err := build(envs)
		envs.Close()
		if err != nil {
			return err
		}
		if i > 0 {
			wholes, whole = append(wholes, d), env
		}
	}
	for range o.installs {
		envs, err := newEnvs(baseList)
		if err != nil {
			return err
		}
		if _, err := envs.PrepareBase(ctx, in, nil); err != nil {
			envs.Close()
			return err
		}
		d, env, err := build(envs)
		envs.Close()
		if err != nil {
			return err
		}
		if env.BaseKey == "" {
			return fmt.Errorf("%s did not become a layer over the base", strings.Join(set.Specs(), " "))
		}
		layers, layer = append(layers, d), env
	}
	wholeOwn, err := pyenv.DiskUsage(whole.Dir, true)
	if err != nil {
		return err
	}
	layerOwn, err := pyenv.DiskUsage(layer.Dir, true)
	if err != nil {
		return err
	}
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Printf("base + one package (%s over %s), medians of %d with a warm download cache:\n", extra.Spec, strings.Join(baseList, ","), o.installs)
	fmt.Printf("  whole environment: %.1f MiB (%.1f MiB not hard-linked with the cache), built in %s\n",
		mib(whole.SizeBytes), mib(wholeOwn), median(wholes).Round(time.Millisecond))
	fmt.Printf("  layer over the base: %.2f MiB (%.2f MiB not hard-linked), built in %s\n",
		mib(layer.SizeBytes), mib(layerOwn), median(layers).Round(time.Millisecond))
	fmt.Printf("  → %.0f× less counted against the size cap; build time ratio whole/layer %.2f×\n",
		float64(whole.SizeBytes)/float64(layer.SizeBytes), float64(median(wholes))/float64(median(layers)))
	return nil
}
