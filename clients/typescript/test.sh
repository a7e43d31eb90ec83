#!/bin/sh
# Builds pyexec-client with tsc (strict) and runs its node --test suites
# against a real `pyexec serve` built from this repository, started by the
# test server launcher (internal/testserver/cmd/testserver).
#
# Needs Go, node >= 18 with npm, and python3 (to fetch ruff and uv, pinned
# by python/tests/_deps.py, for the lint and requirements tests). It installs
# the package's pinned dev dependencies (typescript) with npm ci, whose
# prepare step builds dist/. PYEXEC_BINARY and PYEXEC_TESTSERVER name a
# pyexec and a launcher built already (make test builds them once for every
# suite); else both are built here. Extra arguments go to node --test, e.g.
# ./test.sh --test-name-pattern=session
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$here"

npm ci --prefer-offline --no-audit --no-fund --loglevel=error

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pyexec-node-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
if [ -z "${PYEXEC_BINARY:-}" ]; then
	(cd "$repo" && go build -o "$tmp/pyexec" ./cmd/pyexec)
	PYEXEC_BINARY="$tmp/pyexec"
fi
if [ -z "${PYEXEC_TESTSERVER:-}" ]; then
	(cd "$repo" && go build -o "$tmp/testserver" ./internal/testserver/cmd/testserver)
	PYEXEC_TESTSERVER="$tmp/testserver"
fi
export PYEXEC_BINARY PYEXEC_TESTSERVER

# ruff and uv at the versions the other suites use, installed once per
# machine; without them (no package index) the tests that need them skip.
if [ -z "${PYEXEC_TEST_TOOLS:-}" ]; then
	PYEXEC_TEST_TOOLS=$(cd "$repo/python/tests" && python3 -c '
import os, _deps
uv, _, why = _deps.tools()
print(os.path.dirname(os.path.dirname(uv)) if uv else "")
') || PYEXEC_TEST_TOOLS=""
fi
export PYEXEC_TEST_TOOLS

status=0
node --test "$@" test/*.test.mjs || status=$?
exit $status
