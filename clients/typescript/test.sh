#!/bin/sh
# Builds pyexec-client with tsc (strict) and runs its node --test suites
# against a real `pyexec serve` built from this repository.
#
# Needs Go, node >= 18 with npm, and python3 (to fetch ruff and uv, pinned
# by python/tests/_deps.py, for the lint and requirements tests). It installs
# the package's pinned dev dependencies (typescript) with npm ci. Extra
# arguments go to node --test, e.g. ./test.sh --test-name-pattern=session
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$here"

npm ci --no-audit --no-fund --loglevel=error
npx tsc -p tsconfig.json

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pyexec-node-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
(cd "$repo" && go build -o "$tmp/pyexec" ./cmd/pyexec)
PYEXEC_BINARY="$tmp/pyexec"
export PYEXEC_BINARY

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

exec node --test "$@" test/*.test.mjs
