#!/usr/bin/env bash
# The second README command: set up the host and run the whole test suite (unit, privileged and
# end-to-end tests on real runc, namespaces and images). Packages run one at a time because the
# privileged ones share the host's kernel state (nftables, mounts, cgroups).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/host-setup.sh
go vet ./...
bash scripts/build-console.sh --test
go test -p 1 -count=1 -timeout 60m ./... "$@"
