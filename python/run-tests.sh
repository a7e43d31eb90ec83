#!/bin/sh
# Runs the Python client's tests (and the MCP tests with the official
# Python SDK) against a pyexec server built from this repository.
#
# Needs only Go, python3 (3.9 or newer; 3.10+ for the MCP tests) and PyPI.
# It creates python/.venv (or VENV) on first use (uv is used when present,
# else python3 -m venv + pip), installs this package in editable mode with
# its test dependencies, and runs pytest. The server is started by the test
# server launcher (tests/conftest.py); PYEXEC_BINARY and PYEXEC_TESTSERVER
# name a pyexec and a launcher built already (make test builds them once),
# else they are built. Extra arguments go to pytest.
#
#   PYTHON=python3.9 VENV=/tmp/venv39 ./run-tests.sh -k compat
set -eu

here=$(cd "$(dirname "$0")" && pwd)
venv=${VENV:-"$here/.venv"}
python=${PYTHON:-python3}
stamp="$venv/.installed"

if [ ! -x "$venv/bin/python" ]; then
	if command -v uv >/dev/null 2>&1; then
		uv venv --quiet --python "$python" "$venv"
	else
		"$python" -m venv "$venv"
	fi
fi

# pip_install ARGS: into the venv, with uv when there is one.
pip_install() {
	if command -v uv >/dev/null 2>&1; then
		VIRTUAL_ENV="$venv" uv pip install --quiet "$@"
	else
		"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
	fi
}

# Install when the requirements (or the interpreter) change; a venv made
# for another checkout (VENV shared between clones, as CI's cache is) only
# gets this checkout's package again, in editable mode.
key="$("$venv/bin/python" -c 'import sys; print(sys.version)') $(cksum <"$here/pyproject.toml")"
if [ ! -f "$stamp" ] || [ "$(sed -n 1p "$stamp")" != "$key" ]; then
	command -v uv >/dev/null 2>&1 || pip_install --upgrade pip
	pip_install -e "$here[test]"
	printf '%s\n%s\n' "$key" "$here" >"$stamp"
elif [ "$(sed -n 2p "$stamp")" != "$here" ]; then
	pip_install --no-deps -e "$here"
	printf '%s\n%s\n' "$key" "$here" >"$stamp"
fi

cd "$here"
exec "$venv/bin/python" -m pytest "$@"
