#!/usr/bin/env bash
# Run golangci-lint with the repository's .golangci.yml. The linter is built from the Go module
# proxy at a pinned version and kept under the Go bin directory, one folder per version, so a
# second run (or another checkout on the same machine) does not build it again.
# Extra arguments go to `golangci-lint run` (a package pattern, --fix, …).
set -euo pipefail
cd "$(dirname "$0")/.."

version=v2.15.0
gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin=$(go env GOPATH)/bin
dir=$gobin/golangci-lint-$version
lint=$dir/golangci-lint

if [ ! -x "$lint" ]; then
  echo "lint.sh: installing golangci-lint $version into $dir"
  GOBIN=$dir go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version"
fi

if [ $# -eq 0 ]; then
  set -- ./...
fi
exec "$lint" run "$@"
