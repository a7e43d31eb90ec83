// Package pyenv gives an execution what it needs beyond its interpreter. It
// turns a request into a requirement set — the request's requirements_txt,
// the project's requirements.txt, PEP 723 metadata of the entry file and
// the imports detected in the code — checks the operator's allow and deny
// lists and policy rules, and builds the environment of each set once:
// content-addressed virtualenvs built with uv (or pip), layers over the
// base environment, least-recently-used eviction, source builds in a jail.
// It also lints projects with ruff in a jail.
//
// Its subpackages own the rest: interp discovers the host's interpreters,
// detect finds what a project imports and calls. pyenv re-exports the few
// of their names its callers use (names.go), so that the engine and the
// command line import one package.
//
// pyenv never runs package code on the host (wheel-only installs there;
// source builds run jailed) and never reaches an index the operator did
// not configure.
package pyenv
