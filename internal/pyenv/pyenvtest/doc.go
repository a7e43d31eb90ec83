// Package pyenvtest helps tests that need real environments: it installs
// pinned versions of uv and ruff into a shared cache directory, builds
// small wheels in memory, serves them from a PEP 503 index on loopback and
// creates environment directories that jails can mount. It is imported
// by tests only.
package pyenvtest
