#!/bin/sh
# Runs the Python client's tests (and the MCP tests with the official
# Python SDK) against a pyexec server built from this repository.
#
# Needs only Go, python3 (3.9 or newer; 3.10+ for the MCP tests) and PyPI.
# It creates python/.venv on first use (uv is used when present, else
# python3 -m venv + pip), installs this package in editable mode with its
# test dependencies, and runs pytest. Extra arguments go to pytest.
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

# Reinstall when the package's requirements change.
if [ ! -f "$stamp" ] || [ "$here/pyproject.toml" -nt "$stamp" ]; then
	if command -v uv >/dev/null 2>&1; then
		VIRTUAL_ENV="$venv" uv pip install --quiet -e "$here[test]"
	else
		"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
		"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$here[test]"
	fi
	touch "$stamp"
fi

cd "$here"
exec "$venv/bin/python" -m pytest "$@"
