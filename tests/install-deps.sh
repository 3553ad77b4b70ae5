#!/usr/bin/env bash
# Installs the Debian packages scrubd's tests need. Idempotent; needs root.
set -euo pipefail
pkgs=(
  clang llvm libbpf-dev          # XDP program (bpf2go regenerate check)
  xdp-tools nftables ethtool util-linux  # XDP benchmark baselines, nsenter
  libibverbs-dev rdma-core       # mlx5 Direct Verbs cgo build and layout test
  gcc-aarch64-linux-gnu          # arm64 cgo cross build
  tcpdump                        # libpcap oracle for match semantics
  qemu-user-static               # arm64 tests under qemu-user
  qemu-system-x86 busybox-static cpio kmod iproute2  # kernel lab (tc flower)
  make gcc binutils xz-utils linux-source-6.1         # kernel lab: netdevsim built out of tree
  prometheus                     # promtool check metrics / rules
  systemd                        # systemd-analyze verify of the unit
  gobgpd exabgp                  # outside FlowSpec peers
)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in "${pkgs[@]}"; do installed "$p" || missing+=("$p"); done
updated=false
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq && updated=true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# netdevsim builds against the headers of the kernel the lab boots: the
# release Debian's linux-image-amd64 points at.
$updated || [ -n "$(apt-cache depends linux-image-amd64 2>/dev/null)" ] || { apt-get update -qq && updated=true; }
kver=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/{sub("linux-image-","",$2); print $2; exit}')
if [ -n "$kver" ] && ! installed "linux-headers-$kver"; then
  echo "installing: linux-headers-$kver"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "linux-headers-$kver" >/dev/null
fi
# arm64 rdma-core headers and libraries, for the cross-compiled mlx5 build.
if ! installed libibverbs-dev:arm64; then
  echo "installing: libibverbs-dev:arm64 (multiarch)"
  dpkg --add-architecture arm64
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libibverbs-dev:arm64 >/dev/null
fi
# bpffs for pinned XDP maps.
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf || true
