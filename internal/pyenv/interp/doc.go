// Package interp knows the Python interpreters of the host: which CPythons
// exist (discovered on PATH, in /usr/bin and /usr/local/bin, under pyenv and
// uv, or pinned by the operator), which version a request selects, and which
// host directories the jail must mount read-only for each one to run.
//
// Discovery runs each candidate once, at startup, with a clean environment;
// it never executes a pyenv shim or any other script, only real ELF binaries.
package interp
