#!/usr/bin/env bash
# Build scrubd release binaries into out/ (gitignored):
#
#   out/scrubd-linux-amd64         static, CGO_ENABLED=0
#   out/scrubd-linux-arm64         static, CGO_ENABLED=0 (BlueField Arm cores)
#   out/scrubd-mlx5-linux-amd64    cgo, -tags mlx5, dynamically linked against
#                                  libibverbs/libmlx5 (where libibverbs-dev is installed)
#   out/scrubd-mlx5-linux-arm64    the same for arm64, only where a cross compiler
#                                  (aarch64-linux-gnu-gcc) and libibverbs-dev:arm64 exist
#   out/SHA256SUMS
#
# Usage: deploy/build.sh [--static-only] [--require-mlx5] [--out DIR]
#   --static-only   skip the cgo mlx5 builds
#   --require-mlx5  fail (instead of skipping with a message) when an mlx5
#                   build's toolchain is missing
#
# Version information goes into github.com/scrubd/scrubd/agent/version through
# -ldflags -X; `scrubd version` prints it. The build date is the commit's date
# (or SOURCE_DATE_EPOCH), so two builds of one commit are byte-identical.
# After building, the script checks each binary: static ones must have no ELF
# interpreter, and `scrubd version` (run directly, or under qemu-aarch64-static
# for arm64 when present) must print the injected commit.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)

out=out
static_only=0
require_mlx5=0
while [ $# -gt 0 ]; do
	case "$1" in
	--static-only) static_only=1 ;;
	--require-mlx5) require_mlx5=1 ;;
	--out) out=$2; shift ;;
	-h|--help) sed -n '2,22p' "$0"; exit 0 ;;
	*) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done

pkg=${SCRUBD_PKG:-./agent/cmd/scrubd}
vpkg=github.com/scrubd/scrubd/agent/version

if [ ! -d "$pkg" ]; then
	echo "build.sh: $pkg does not exist yet" >&2
	exit 1
fi

if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
	version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
	commit=$(git rev-parse HEAD)
	epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
else
	version=${SCRUBD_VERSION:-dev}
	commit=${SCRUBD_COMMIT:-}
	epoch=${SOURCE_DATE_EPOCH:-$(date +%s)}
fi
date=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
ldx="-X $vpkg.Version=$version -X $vpkg.Commit=$commit -X $vpkg.Date=$date"

mkdir -p "$out"
built=()

# check_version BIN [RUNNER...]: the binary must report the injected commit.
check_version() {
	local bin=$1; shift
	local v
	if ! v=$("$@" "$bin" version 2>&1); then
		echo "build.sh: $bin version failed: $v" >&2
		return 1
	fi
	if [ -n "$commit" ] && [[ "$v" != *"${commit:0:12}"* ]]; then
		echo "build.sh: $bin version printed '$v', without commit ${commit:0:12}" >&2
		return 1
	fi
	echo "  $bin: $v"
}

runner_for() {
	case "$1" in
	amd64) [ "$(uname -m)" = x86_64 ] && echo direct ;;
	arm64)
		if [ "$(uname -m)" = aarch64 ]; then echo direct
		elif command -v qemu-aarch64-static >/dev/null; then echo qemu-aarch64-static
		fi ;;
	esac
}

run_check() { # BIN ARCH
	local r
	r=$(runner_for "$2" || true)
	case "$r" in
	direct) check_version "$1" ;;
	"") echo "  $1: not run (no way to execute $2 here)" ;;
	*) check_version "$1" "$r" ;;
	esac
}

for arch in amd64 arm64; do
	bin=$out/scrubd-linux-$arch
	echo "build: $bin (static)"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false \
		-ldflags "-s -w -buildid= $ldx" -o "$bin" "$pkg"
	if readelf -l "$bin" 2>/dev/null | grep -q 'Requesting program interpreter'; then
		echo "build.sh: $bin has an ELF interpreter: not static" >&2
		exit 1
	fi
	run_check "$bin" "$arch"
	built+=("$bin")
done

# mlx5 builds: cgo against rdma-core. libibverbs loads its providers
# (libmlx5) with dlopen, so these binaries stay dynamically linked and need
# the rdma-core runtime (libibverbs1, ibverbs-providers) on the target.
mlx5_skip() {
	if [ "$require_mlx5" = 1 ]; then
		echo "build.sh: mlx5 build for $1 impossible: $2" >&2
		exit 1
	fi
	echo "skip: mlx5 build for $1: $2"
}

has_verbs() { # MULTIARCH-TRIPLET
	[ -f /usr/include/infiniband/verbs.h ] && [ -f /usr/include/infiniband/mlx5dv.h ] &&
		[ -e "/usr/lib/$1/libibverbs.so" ] && [ -e "/usr/lib/$1/libmlx5.so" ]
}

if [ "$static_only" = 0 ]; then
	for arch in amd64 arm64; do
		case $arch in
		amd64) triplet=x86_64-linux-gnu; cc=${CC_AMD64:-} ;;
		arm64) triplet=aarch64-linux-gnu; cc=${CC_ARM64:-} ;;
		esac
		if [ -z "$cc" ]; then
			if [ "$(go env GOHOSTARCH)" = "$arch" ]; then cc=gcc; else cc=$triplet-gcc; fi
		fi
		if ! command -v "$cc" >/dev/null; then
			mlx5_skip $arch "no C compiler $cc (install gcc-$triplet for a cross build)"
			continue
		fi
		if ! has_verbs $triplet; then
			mlx5_skip $arch "rdma-core development files for $triplet missing (install libibverbs-dev:$arch)"
			continue
		fi
		bin=$out/scrubd-mlx5-linux-$arch
		echo "build: $bin (cgo, tags mlx5, CC=$cc)"
		CGO_ENABLED=1 CC=$cc GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false -tags mlx5 \
			-ldflags "-s -w -buildid= $ldx" -o "$bin" "$pkg"
		r=$(runner_for $arch || true)
		if [ "$r" = direct ]; then
			check_version "$bin"
		elif [ -n "$r" ] && [ -e /lib/ld-linux-aarch64.so.1 ]; then
			# multiarch arm64 libraries (libibverbs-dev:arm64 brings libc6:arm64)
			check_version "$bin" "$r"
		elif [ -n "$r" ] && [ -e /usr/$triplet/lib/ld-linux-aarch64.so.1 ]; then
			QEMU_LD_PREFIX=/usr/$triplet check_version "$bin" "$r"
		else
			echo "  $bin: not run (no $arch loader/libraries to execute a dynamic binary here)"
		fi
		built+=("$bin")
	done
fi

(cd "$out" && sha256sum "${built[@]##*/}" >SHA256SUMS)
echo "built ${#built[@]} binaries in $out (version $version, commit ${commit:0:12}, date $date)"
