#!/usr/bin/env bash
# Installs what hutchd and its tests need on a Debian host (run as root). Idempotent.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  echo "host-setup: run as root (hutchd drives runc, mounts and network namespaces)" >&2
  exit 1
fi

need=()
for pair in runc:runc debootstrap:debootstrap nft:nftables ip:iproute2 git:git curl:curl unshare:util-linux ps:procps make:make chromium:chromium mkfs.ext4:e2fsprogs zstd:zstd tmux:tmux; do
  bin=${pair%%:*}; pkg=${pair#*:}
  command -v "$bin" >/dev/null 2>&1 || need+=("$pkg")
done
[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
[ -e /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
if [ ${#need[@]} -gt 0 ]; then
  echo "host-setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The kernel's inotify limits are per user. A runc sandbox with a user namespace (the default)
# is charged as its own range's root, so these are what each sandbox gets: the kernel's default
# of 128 instances is too few for a dev server plus a type checker. A sandbox without one
# (--userns off) runs as host root and shares root's. Raise them, never lower.
raise() { # raise KEY MIN
  local cur; cur=$(sysctl -n "$1" 2>/dev/null || echo 0)
  if [ "$cur" -lt "$2" ]; then sysctl -q -w "$1=$2" || echo "host-setup: could not raise $1 to $2" >&2; fi
}
raise fs.inotify.max_user_instances 8192
raise fs.inotify.max_user_watches 1048576

if ! command -v go >/dev/null 2>&1; then
  cat >&2 <<'MSG'
host-setup: Go is missing. Install Go 1.21 or newer (the go command then fetches the exact
toolchain go.mod names from the Go module proxy by itself), e.g. from your distribution's
backports or the official tarball, and run this again.
MSG
  exit 1
fi
# gVisor: the runsc hutch targets, built from the Go module proxy (about a minute) into
# /usr/local/bin, ahead of any distribution runsc on the PATH. Debian's runsc (20221219) is too
# old: it refuses coreutils 9.1's statx (ls and stat fail in the default image), cannot save
# host-network sandboxes (no memory snapshots) and has no --overlay2 (docs/ARCHITECTURE.md,
# "gVisor runtime"). The build is skipped when the binary already carries this module version.
RUNSC_VERSION=v0.0.0-20260905035102-160fafc42237
RUNSC_BIN=/usr/local/bin/runsc
if ! go version -m "$RUNSC_BIN" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+gvisor.dev/gvisor[[:space:]]+$RUNSC_VERSION([[:space:]]|$)"; then
  echo "host-setup: building runsc $RUNSC_VERSION into $RUNSC_BIN (about a minute)"
  gobin=$(mktemp -d)
  trap 'rm -rf "$gobin"' EXIT
  GOBIN=$gobin CGO_ENABLED=0 go install "gvisor.dev/gvisor/runsc@$RUNSC_VERSION"
  install -m 0755 "$gobin/runsc" "$RUNSC_BIN"
  rm -rf "$gobin"
  trap - EXIT
fi
echo "host-setup: ok ($(runc --version | head -1), runsc $RUNSC_VERSION, $(go version | cut -d' ' -f3))"
