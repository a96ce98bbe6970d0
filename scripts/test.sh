#!/usr/bin/env bash
# The second README command: set up the host and run the whole test suite (unit, privileged and
# end-to-end tests on real runc, runsc, namespaces and images), and a core end-to-end subset
# with gVisor as the default runtime. Packages that need no root run two at a time, beside the
# gVisor subset; the ones in scripts/privileged-packages run one at a time, after them and
# alone, because they share the host's kernel state (nftables, mounts, cgroups) and the gVisor
# memory-guard and containment tests are CPU-sensitive. Arguments go to every go test run.
set -euo pipefail
cd "$(dirname "$0")/.."
# The end-to-end suite builds its binaries with cgo off (hutch-init must be static); vet and
# the tests build the same way, so every phase reuses one build cache instead of compiling the
# dependency tree twice. Nothing in the module uses cgo.
export CGO_ENABLED=0

# phase NAME CMD...: runs CMD and prints how long it took, so a slow CI run shows where; the
# table at the end repeats every phase's time. The table is a file, so that a phase run in the
# background adds its line too.
summary=$(mktemp "${TMPDIR:-/tmp}/hutch-test-phases.XXXXXX")
phase() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "test.sh: phase $name started at $(date -u +%H:%M:%S)"
  "$@" || rc=$?
  echo "test.sh: phase $name took $((SECONDS - start)) s (rc $rc)"
  printf '%-14s %6d s   rc %d\n' "$name" $((SECONDS - start)) "$rc" >>"$summary"
  return $rc
}

print_summary() {
  local rc=$?
  local f
  for f in "${jsondir:-/nonexistent}"/*.json; do
    [ -s "$f" ] || continue
    echo "test.sh: slowest tests of phase $(basename "$f" .json) (30 s or more)"
    "$gotestsum" tool slowest --jsonfile "$f" --threshold 30s | head -20 | sed 's/^/  /'
  done
  echo "test.sh: phase times"
  sed 's/^/  /' "$summary"
  rm -f "$summary"
  printf '  %-14s %6d s   rc %d\n' total "$SECONDS" "$rc"
}
trap print_summary EXIT

phase host-setup bash scripts/host-setup.sh

# gotestsum runs every go test phase: the output is go test's own, and its JSON record (under
# $jsondir) gives the slowest tests at the end of the run. It is built from the Go module proxy
# at a pinned version and kept under the Go bin directory, as scripts/lint.sh keeps its linter.
gotestsum_version=v1.13.0
gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin=$(go env GOPATH)/bin
gotestsum=$gobin/gotestsum-$gotestsum_version/gotestsum
if [ ! -x "$gotestsum" ]; then
  echo "test.sh: installing gotestsum $gotestsum_version"
  GOBIN=$(dirname "$gotestsum") go install "gotest.tools/gotestsum@$gotestsum_version"
fi
jsondir=$(mktemp -d "${TMPDIR:-/tmp}/hutch-test-json.XXXXXX")
# gotest PHASE ARGS...: go test ARGS..., recorded as PHASE.
gotest() {
  local name=$1
  shift
  "$gotestsum" --format standard-quiet --jsonfile "$jsondir/$name.json" -- "$@"
}
phase vet go vet ./...
phase lint bash scripts/lint.sh
phase console bash scripts/build-console.sh --test

# Every package is in exactly one of the two sets; e2e is the last of the privileged ones and
# runs in a phase of its own.
mapfile -t privileged < <(grep -v '^\s*\(#\|$\)' scripts/privileged-packages)
mapfile -t unprivileged < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}./{{.ImportPath}}{{end}}' ./... |
  sed "s#^\./$(go list -m)#.#" | grep -vxF -f <(printf '%s\n' "${privileged[@]}"))
serial=()
for p in "${privileged[@]}"; do [[ $p == ./test/e2e ]] || serial+=("$p"); done

# HUTCH_TEST_UNPRIVILEGED=1 makes testutil.RequiresRoot fail instead of run: a package that
# needs root but is missing from scripts/privileged-packages fails here.
# The test phases all run even when one fails, as one go test over every package did; the
# script fails at the end then.
failed=0

# The core of the end-to-end suite with every sandbox on gVisor (hutchd --runtime gvisor):
# exec, files, processes, preview URLs, terminals, watch, code contexts and egress. The escape
# suite and TestGVisor run on gVisor in the e2e phase. It runs beside the unprivileged
# packages, which touch no kernel state, and before the privileged phase starts, so that the
# privileged and e2e sets still run alone and one at a time. Its tests are none of the
# CPU-sensitive ones (the memory guard's and containment's), and each has a hang bound of a
# minute or more. Its output is printed when it ends, not mixed into the unprivileged phase's.
gvisor_core='^(TestExecAcceptance|TestFilesThroughHutchd|TestProcessAcceptance|TestPreviewAcceptance|TestTerminal|TestWatch|TestCodePython|TestEgressPolicyAPI|TestEgressFailClosed)$'
gvisor_log=$jsondir/gvisor-core.log
HUTCH_TEST_RUNTIME=gvisor phase gvisor-core gotest gvisor-core -parallel 3 -count=1 -timeout 30m -run "$gvisor_core" ./test/e2e "$@" >"$gvisor_log" 2>&1 &
gvisor_pid=$!
HUTCH_TEST_UNPRIVILEGED=1 phase unprivileged gotest unprivileged -p 2 -count=1 -timeout 20m "${unprivileged[@]}" "$@" || failed=1
wait "$gvisor_pid" || failed=1
cat "$gvisor_log"

phase privileged gotest privileged -p 1 -count=1 -timeout 30m "${serial[@]}" "$@" || failed=1
# In e2e, the tests that call parallel(t) (harness_test.go) run three at a time, after all the
# others: they mostly wait on sandboxes.
phase e2e gotest e2e -p 1 -parallel 3 -count=1 -timeout 40m ./test/e2e "$@" || failed=1
exit $failed
