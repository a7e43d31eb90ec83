#!/bin/sh
# install-chromium.sh installs Debian's chromium for the playground's
# browser tests (internal/api/playground_browser_test.go) when it is
# missing. It needs root and apt; without them it says so and exits 0, and
# the browser tests skip with the reason.
set -eu
if command -v chromium >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "install-chromium: not root or no apt-get; the browser tests will skip" >&2
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends chromium
