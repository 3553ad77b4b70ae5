#!/usr/bin/env bash
# The Debian packages each step of tests/all.sh needs, in one table.
#
# tests/install-deps.sh installs the union of this table, by name and with
# --no-install-recommends, so that nothing a step needs arrives only as a
# Recommends (the arm64 C library headers, libc6-dev-arm64-cross, are one:
# gcc-aarch64-linux-gnu only recommends them). tests/all.sh calls
# `deps_require STEP` before each step: a package the table names that is not
# installed fails the step at once with the package's name, instead of a
# compiler or test error far inside it.
#
# A package written as NAME:ARCH is a multiarch package (dpkg
# --add-architecture ARCH first). The token @kernel-headers stands for the
# linux-headers package of the kernel Debian's linux-image-amd64 points at:
# the kernel lab builds netdevsim against it.
#
# tests/depscheck.sh runs the ebpf and mlx5 steps' compilers under strace and
# fails when they read a file from a package this table does not name for the
# step (strace is in those steps for that).
#
# Sourced, not run.

declare -A DEPS_STEP=(
	[none]=""
	[vet]="gcc libc6-dev libibverbs-dev"
	[ebpf]="clang llvm libbpf-dev strace"
	[test]="gcc libc6-dev clang llvm libbpf-dev xdp-tools nftables ethtool util-linux iproute2 tcpdump qemu-system-x86 busybox-static cpio kmod make binutils xz-utils linux-source-6.1 @kernel-headers prometheus systemd gobgpd exabgp dpdk-dev"
	[race]="gcc libc6-dev"
	[mlx5]="strace gcc libc6-dev libibverbs-dev rdma-core gcc-aarch64-linux-gnu libc6-dev-arm64-cross libibverbs-dev:arm64"
	[mutation]="qemu-user-static"
	[arm64]="qemu-user-static"
	[bench]="xdp-tools nftables iproute2 dpdk-dev"
	[build]="gcc libc6-dev libibverbs-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross libibverbs-dev:arm64 qemu-user-static binutils"
)

# deps_installed PKG: whether dpkg has PKG (NAME or NAME:ARCH) installed.
deps_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

# deps_kernel_headers: the linux-headers package for the kernel the lab boots.
deps_kernel_headers() {
	local kver
	kver=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-/{sub("linux-image-","",$2); print $2; exit}')
	[ -n "$kver" ] && echo "linux-headers-$kver"
}

# deps_expand STEP...: the packages of the named steps (all steps when none),
# one per line, with @kernel-headers resolved.
deps_expand() {
	local steps=("$@") s p out=()
	[ ${#steps[@]} -gt 0 ] || steps=("${!DEPS_STEP[@]}")
	for s in "${steps[@]}"; do
		if [ -z "${DEPS_STEP[$s]+x}" ]; then
			echo "deps: unknown step '$s' (known: ${!DEPS_STEP[*]})" >&2
			return 2
		fi
		for p in ${DEPS_STEP[$s]}; do
			if [ "$p" = @kernel-headers ]; then
				p=$(deps_kernel_headers) || {
					echo "deps: cannot resolve the kernel headers package (apt-cache depends linux-image-amd64 names no kernel; run apt-get update)" >&2
					return 2
				}
			fi
			out+=("$p")
		done
	done
	[ ${#out[@]} -eq 0 ] || printf '%s\n' "${out[@]}" | sort -u
}

# deps_missing STEP...: the packages of those steps that are not installed.
deps_missing() {
	local p list
	list=$(deps_expand "$@") || return 2
	for p in $list; do
		deps_installed "$p" || echo "$p"
	done
}

# deps_require STEP: fail, naming each package, when STEP's packages are not
# all installed.
deps_require() {
	local missing
	missing=$(deps_missing "$1") || exit 2
	if [ -n "$missing" ]; then
		echo "step '$1' needs Debian packages that are not installed: $(echo $missing)" >&2
		echo "install them with: bash tests/install-deps.sh (as root)" >&2
		exit 1
	fi
}
