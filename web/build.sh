#!/bin/sh
# build.sh bundles the playground's editor (web/src/editor.js, CodeMirror 6)
# into internal/api/web/editor.js, which is committed so that `go build`
# needs no node. Run it after changing web/src or web/package.json:
#   ./web/build.sh
set -eu
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --silent
./node_modules/.bin/esbuild src/editor.js --bundle --minify --format=esm --target=es2020 \
  --legal-comments=none --outfile=../internal/api/web/editor.js
