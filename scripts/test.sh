#!/usr/bin/env bash
# The second README command: set up the host and run the whole test suite (unit, privileged and
# end-to-end tests on real runc, runsc, namespaces and images), then a core end-to-end subset
# with gVisor as the default runtime. Packages run one at a time because the
# privileged ones share the host's kernel state (nftables, mounts, cgroups).
set -euo pipefail
cd "$(dirname "$0")/.."

# phase NAME CMD...: runs CMD and prints how long it took, so a slow CI run shows where.
phase() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "test.sh: phase $name started at $(date -u +%H:%M:%S)"
  "$@" || rc=$?
  echo "test.sh: phase $name took $((SECONDS - start)) s (rc $rc)"
  return $rc
}

phase host-setup bash scripts/host-setup.sh
phase vet go vet ./...
phase lint bash scripts/lint.sh
phase console bash scripts/build-console.sh --test
phase packages go test -p 1 -count=1 -timeout 60m ./... "$@"

# The core of the end-to-end suite once more with every sandbox on gVisor (hutchd --runtime
# gvisor): exec, files, processes, preview URLs, terminals, watch, code contexts and egress.
# The escape suite and TestGVisor ran on gVisor in the pass above.
gvisor_core='^(TestExecAcceptance|TestFilesThroughHutchd|TestProcessAcceptance|TestPreviewAcceptance|TestTerminal|TestWatch|TestCodePython|TestEgressPolicyAPI|TestEgressFailClosed)$'
HUTCH_TEST_RUNTIME=gvisor phase gvisor-core go test -count=1 -timeout 30m -run "$gvisor_core" ./test/e2e "$@"
