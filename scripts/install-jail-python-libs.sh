#!/bin/sh
# install-jail-python-libs.sh installs Debian's requests and httpx for the
# host interpreter (/usr/bin/python3) that the engine's jail tests run, so
# that the secrets tests reach the egress with them as with urllib and curl
# (internal/engine/executions/secrets_clients_linux_test.go). It needs root
# and apt; without them it says so and exits 0, and that test skips with the
# reason.
set -eu
if /usr/bin/python3 -c 'import requests, httpx' >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "install-jail-python-libs: not root or no apt-get; the requests/httpx secrets test will skip" >&2
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends python3-requests python3-httpx
