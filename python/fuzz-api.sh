#!/bin/sh
# Fuzzes the served OpenAPI document with schemathesis against a real
# `pyexec serve` built from this repository: real jails, executions that
# really run, an API key. Fails on any 5xx and on any response (status,
# content type, headers, body, SSE events) the document does not allow;
# the checks turned off, and why, are in fuzz/schemathesis.toml.
#
# Needs root (for the jails), Go, python3 and PyPI. A Python 3.12 or newer
# is preferred when there is one: under CPython 3.11 Hypothesis can hit an
# interpreter fault (SystemError from the ast module) while generating. schemathesis is pinned
# and installed into python/.fuzz-venv (or FUZZ_VENV) on first use.
#
# The budget is fixed in time: FUZZ_MAX_TIME seconds (default 150), from the
# seed FUZZ_SEED (default 1). Measured: schemathesis 4.32's fuzzing phase
# generates cases until the time is up whatever max-examples says, so the
# time, not a count, bounds the run (given 300 s it used all 300).
#
#   FUZZ_SEED=7 ./python/fuzz-api.sh
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
venv=${FUZZ_VENV:-"$here/.fuzz-venv"}
# The venv's interpreter: PYTHON, else the newest 3.12+ found (on PATH or
# installed by pyenv), else python3.
python=${PYTHON:-}
if [ -z "$python" ]; then
	pyenv_pythons=
	if command -v pyenv >/dev/null 2>&1; then
		pyenv_pythons=$(ls -d "$(pyenv root)"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV || true)
	fi
	for candidate in python3.14 python3.13 python3.12 $pyenv_pythons python3; do
		if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
			python=$candidate
			break
		fi
	done
fi
version=4.32.5

if [ "$(id -u)" != 0 ]; then
	echo "fuzz-api: skipped, the jails need root" >&2
	exit 0
fi

# The stamp names the interpreter too: a venv shared between checkouts
# (FUZZ_VENV, as CI's cache is) made by another one is made again.
stamp="$venv/.schemathesis-$version-$("$python" -c 'import sys; print("py%d.%d" % sys.version_info[:2])')"
if [ ! -f "$stamp" ]; then
	rm -rf "$venv"
	if command -v uv >/dev/null 2>&1; then
		uv venv --quiet --python "$python" "$venv"
		VIRTUAL_ENV="$venv" uv pip install --quiet "schemathesis==$version"
	else
		"$python" -m venv "$venv"
		"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$version"
	fi
	touch "$stamp"
fi

work=$(mktemp -d /tmp/pyexec-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM

# The server: started, watched and cleaned up by the test server launcher
# (internal/testserver/cmd/testserver), which builds pyexec unless
# PYEXEC_BINARY names one; PYEXEC_TESTSERVER names a launcher built already.
launcher=${PYEXEC_TESTSERVER:-}
if [ -z "$launcher" ]; then
	(cd "$repo" && go build -o "$work/testserver" ./internal/testserver/cmd/testserver)
	launcher=$work/testserver
fi

status=0
cd "$work" # schemathesis keeps its cache in the working directory
# The server has previews on (--preview), so that their routes are fuzzed
# as they work rather than only refused (off, each is a 501 saying so).
# shellcheck disable=SC2016 # expanded by the inner shell, which the launcher gives the URL and key
"$launcher" -api-key fuzz -log "$work/server.log" -- --host 127.0.0.1 --preview -- sh -c '
	PYEXEC_FUZZ_KEY=$PYEXEC_TEST_API_KEY exec "$0" --config-file "$1" --no-color run "$PYEXEC_TEST_URL/openapi.json" \
		--workers 2 --max-time "$2" --seed "$3" --report-dir "$4"' \
	"$venv/bin/schemathesis" "$here/fuzz/schemathesis.toml" "${FUZZ_MAX_TIME:-150}" "${FUZZ_SEED:-1}" "$work/report" ||
	status=$?
if grep -q '"level":"ERROR"\|level=ERROR\|panic' "$work/server.log"; then
	echo "fuzz-api: the server logged errors:" >&2
	grep '"level":"ERROR"\|level=ERROR\|panic' "$work/server.log" | head -20 >&2
	status=1
fi
exit "$status"
