package pyenv

import (
	"context"

	"github.com/pyexec/pyexec/internal/pyenv/detect"
	"github.com/pyexec/pyexec/internal/pyenv/interp"
)

// The names below belong to pyenv's subpackages; pyenv re-exports those its
// callers use, so that the engine and the command line import one package
// for interpreters, detection and environments.

// Interpreter is one usable CPython (see interp.Interpreter).
type Interpreter = interp.Interpreter

// Interpreters is the set Discover found (see interp.Interpreters).
type Interpreters = interp.Interpreters

// ErrUnknownVersion: no interpreter of the requested version is available.
var ErrUnknownVersion = interp.ErrUnknownVersion

// Discover finds the usable interpreters of the host (see interp.Discover).
func Discover(ctx context.Context, opts interp.Options) (*Interpreters, error) {
	return interp.Discover(ctx, opts)
}

// OptionsFromEnv reads Discover's options the usual way (see
// interp.OptionsFromEnv).
func OptionsFromEnv(getenv func(string) string) interp.Options { return interp.OptionsFromEnv(getenv) }

// VersionFromImage maps a docker_image of the old API to a Python version
// (see interp.VersionFromImage).
func VersionFromImage(image string) (string, bool) { return interp.VersionFromImage(image) }

// Analyzer detects the imports and calls of projects (see detect.Analyzer).
type Analyzer = detect.Analyzer

// Analysis is what detection found in a project (see detect.Analysis).
type Analysis = detect.Analysis

// Import is one import statement's module (see detect.Import).
type Import = detect.Import

// AnalyzerConfig configures an Analyzer.
type AnalyzerConfig = detect.AnalyzerConfig

// NewAnalyzer returns an Analyzer whose jailed detector runs through run.
func NewAnalyzer(run detect.JailRunner, cfg AnalyzerConfig) *Analyzer {
	return detect.NewAnalyzer(run, cfg)
}

// ErrTooComplex marks code beyond what import detection reads (a 400).
var ErrTooComplex = detect.ErrTooComplex
