#!/usr/bin/env bash
# Builds the web console that hutchd serves at /console/: the xterm.js addon
# (web/xterm-addon-hutch → dist/) and the console (web/console → dist/index.html, app.js,
# app.css). Idempotent and quick when nothing changed: `npm ci` runs only when a
# package-lock.json differs from the one last installed, a bundle only when a source is newer.
#   --browser-test  also install the browser test's packages (test/console)
#   --test          --browser-test, and run the addon's unit tests (node's test runner)
# Without npm it prints why and exits 0: hutchd then serves a page saying how to build it.
set -euo pipefail
cd "$(dirname "$0")/.."

browser_test=false unit_test=false
case "${1:-}" in
  --browser-test) browser_test=true ;;
  --test) browser_test=true unit_test=true ;;
  "") ;;
  *) echo "usage: $0 [--browser-test|--test]" >&2; exit 2 ;;
esac

if ! command -v npm >/dev/null 2>&1; then
  echo "build-console: npm not found (install Node.js 20+); the web console is not built" >&2
  exit 0
fi

# install DIR: npm ci unless DIR/node_modules was installed from this very package-lock.json.
install() {
  local dir=$1 stamp=$1/node_modules/.hutch-installed-lock
  if [[ -f "$stamp" ]] && cmp -s "$dir/package-lock.json" "$stamp"; then
    return
  fi
  echo "==> npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$dir/package-lock.json" "$stamp"
}

# stale OUT PATH...: true when OUT is missing or any file under PATH... is newer.
stale() {
  local out=$1
  shift
  [[ ! -e "$out" ]] && return 0
  [[ -n "$(find "$@" -newer "$out" -type f -print -quit)" ]]
}

addon=web/xterm-addon-hutch
console=web/console

install "$addon"
if stale "$addon/dist/index.js" "$addon/src" "$addon/package.json" "$addon/tsconfig.json" "$addon/package-lock.json"; then
  echo "==> building $addon"
  (cd "$addon" && npm run --silent build)
fi

install "$console"
if stale "$console/dist/app.js" "$console/src" "$console/index.html" "$console/build.mjs" "$console/package.json" \
  "$console/package-lock.json" "$console/tsconfig.json" "$addon/dist"; then
  echo "==> building $console"
  (cd "$console" && npm run --silent build)
fi

if $browser_test; then
  install test/console
fi
if $unit_test; then
  echo "==> unit tests of $addon"
  (cd "$addon" && node --test test/)
fi
echo "build-console: web console ready in $console/dist"
