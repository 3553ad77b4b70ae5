#!/usr/bin/env bash
# Installs the Debian packages scrubd's tests need: every package named in
# tests/deps.sh (the table of what each step of tests/all.sh needs), by name,
# without Recommends. Idempotent; needs root. Checks afterwards that every
# package in the table is installed, and fails naming those that are not.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh

export DEBIAN_FRONTEND=noninteractive
updated=false
update() { $updated || { apt-get update -qq && updated=true; }; }

# Multiarch packages (NAME:ARCH) need their architecture known to dpkg first.
all=$(deps_expand 2>/dev/null) || { update; all=$(deps_expand); }
for arch in $(printf '%s\n' $all | awk -F: 'NF==2{print $2}' | sort -u); do
	if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
		echo "adding dpkg architecture $arch"
		dpkg --add-architecture "$arch"
		updated=false
	fi
done

# The package lists may be stale (the kernel headers' name comes from them):
# when anything is missing, update them first and resolve the table again.
missing=$(deps_missing 2>/dev/null) || missing=unresolved
if [ -n "$missing" ]; then
	update
	missing=$(deps_missing)
fi
if [ -n "$missing" ]; then
	echo "installing: $(echo $missing)"
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# bpffs for pinned XDP maps.
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf || true

still=$(deps_missing)
if [ -n "$still" ]; then
	echo "install-deps: still not installed after apt-get: $(echo $still)" >&2
	exit 1
fi
