package pyenv

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/pyexec/pyexec/internal/pyenv/detect"
)

// ErrNotAllowed marks an explicitly requested distribution that the
// operator's allowlist or denylist forbids (a 400).
var ErrNotAllowed = errors.New("distribution not allowed on this server")

// NoDetection is the requirements_txt value that turns import detection
// off (and installs nothing).
const NoDetection = "-"

// File is one file of a project, relative to the workspace.
type File struct {
	Path string
	Data []byte
}

// ResolverConfig is the operator's configuration of dependency
// resolution.
type ResolverConfig struct {
	// Imports maps import names to distributions; nil means the curated
	// DefaultImportMap.
	Imports *ImportMap
	// Allow, when not empty, lists the only distributions that may be
	// installed; Deny lists distributions that never are. Names are
	// normalised.
	Allow, Deny []string
	// Policy rules run on every project's imports and calls.
	Policy Policy
	// DisableDetection turns off import auto-detection for every request.
	DisableDetection bool
}

// Needs is what a request needs beyond its interpreter.
type Needs struct {
	Set      Set      // empty: the bare interpreter will do
	Warnings []string // policy warnings, detected imports not installed
	// Analysis is what the import detector found (nil: it did not run).
	// A queued execution carries it to the node that runs it, which
	// gives it to Remember instead of running the detector again.
	Analysis *Analysis
}

// Resolver turns a request into its dependency set: the request's
// requirements_txt › the project's requirements.txt › PEP 723 metadata of
// the entry file › imports detected in the code.
type Resolver struct {
	cfg ResolverConfig
	an  *Analyzer
}

// NewResolver validates cfg and returns a Resolver that detects imports
// with an.
func NewResolver(an *Analyzer, cfg ResolverConfig) (*Resolver, error) {
	if cfg.Imports == nil {
		cfg.Imports = DefaultImportMap()
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	for i, n := range cfg.Allow {
		cfg.Allow[i] = NormalizeName(n)
	}
	for i, n := range cfg.Deny {
		cfg.Deny[i] = NormalizeName(n)
	}
	return &Resolver{cfg: cfg, an: an}, nil
}

// Resolve computes what the project needs. Errors that are the request's
// fault wrap ErrBadRequirement, ErrNotAllowed or ErrPolicy; others are
// failures of the detector.
func (r *Resolver) Resolve(ctx context.Context, in Interpreter, files []File, entry, requirementsTxt string) (Needs, error) {
	var needs Needs
	var lists [][]Requirement
	detecting := !r.cfg.DisableDetection && requirementsTxt != NoDetection
	if requirementsTxt != NoDetection {
		reqs, err := ParseRequirements(requirementsTxt, FromRequest)
		if err != nil {
			return Needs{}, fmt.Errorf("requirements_txt: %w", err)
		}
		lists = append(lists, reqs)
		for _, f := range files {
			if path.Clean(f.Path) == "requirements.txt" {
				reqs, err := ParseRequirements(string(f.Data), FromProject)
				if err != nil {
					return Needs{}, fmt.Errorf("requirements.txt: %w", err)
				}
				lists = append(lists, reqs)
			}
		}
		for _, f := range files {
			if path.Clean(f.Path) == path.Clean(entry) {
				reqs, err := ScriptDependencies(string(f.Data))
				if err != nil {
					return Needs{}, fmt.Errorf("%s: %w", entry, err)
				}
				lists = append(lists, reqs)
			}
		}
	}
	for _, list := range lists {
		for _, req := range list {
			if err := r.allowed(req.Name); err != nil {
				return Needs{}, fmt.Errorf("%s: %w", req.Source, err)
			}
		}
	}
	if detecting || len(r.cfg.Policy.Rules) > 0 {
		an, err := r.an.Analyze(ctx, in, detectFiles(files), entry, r.cfg.Policy.readsCalls())
		if err != nil {
			return Needs{}, err
		}
		w, err := r.cfg.Policy.Check(an.AllImports, an.Calls)
		if err != nil {
			return Needs{}, err
		}
		needs.Warnings, needs.Analysis = w, an
		if detecting {
			var detected []Requirement
			for _, req := range r.cfg.Imports.Requirements(an.Imports) {
				if err := r.allowed(req.Name); err != nil {
					needs.Warnings = append(needs.Warnings, fmt.Sprintf("imported distribution %s is not installed: %v", req.Name, err))
					continue
				}
				detected = append(detected, req)
			}
			lists = append(lists, detected)
		}
	}
	needs.Set = Merge(lists...)
	return needs, nil
}

// Remember keeps an that Resolve returned for the same interpreter,
// files and entry (on this node or another): a later Resolve of that
// project uses it instead of running the detector. Everything else
// Resolve decides (requirements, allow and deny lists, policy) is
// decided again.
func (r *Resolver) Remember(in Interpreter, files []File, entry string, an *Analysis) {
	r.an.Remember(in, detectFiles(files), entry, an)
}

func (r *Resolver) allowed(name string) error {
	if slices.Contains(r.cfg.Deny, name) {
		return fmt.Errorf("%w: %s is on the denylist", ErrNotAllowed, name)
	}
	if len(r.cfg.Allow) > 0 && !slices.Contains(r.cfg.Allow, name) {
		return fmt.Errorf("%w: %s is not on the allowlist", ErrNotAllowed, name)
	}
	return nil
}

// detectFiles is files as detection takes them.
func detectFiles(files []File) []detect.File {
	df := make([]detect.File, len(files))
	for i, f := range files {
		df[i] = detect.File{Path: f.Path, Data: f.Data}
	}
	return df
}
