#!/usr/bin/env bash
# Checks that a test step uses nothing from the system that tests/deps.sh does
# not name for it: a package installed by hand on one machine (and so missing
# on a fresh one) fails here, on any machine, naming the package.
#
#   bash tests/depscheck.sh STEP -- COMMAND [ARG...]
#
# COMMAND runs under strace; every file it opens or executes under /usr, /bin,
# /sbin or /lib (outside /usr/local, where Go lives) is mapped to its Debian
# package with dpkg -S (locale data, which programs read only where it
# exists, is left out). Each such package must be one of STEP's packages in
# tests/deps.sh, a package those depend on (apt-cache depends --recurse,
# without Recommends), or part of the base system (Essential, or Priority
# required or important). Give COMMAND an empty GOCACHE so that Go really
# compiles (a cached build opens no C header).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh

[ $# -ge 3 ] && [ "$2" = -- ] || { echo "usage: $0 STEP -- COMMAND [ARG...]" >&2; exit 2; }
step=$1
shift 2
command -v strace >/dev/null || { echo "depscheck: strace is not installed (Debian package strace)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

strace -f -qq -z --seccomp-bpf -e trace=openat,execve -o "$tmp/trace" "$@"

# Paths that were opened or executed successfully, outside /usr/local.
grep -oE '(openat\(AT_FDCWD, |execve\()"[^"]+"' "$tmp/trace" |
	sed -E 's/^[^"]*"//; s/"$//' |
	grep -E '^/(usr|bin|sbin|lib|lib64)/' |
	grep -vE '^/usr/local/|^/usr/(share|lib)/locale/' |
	sort -u >"$tmp/paths"

# Resolve each path to its canonical name (dpkg knows /usr/lib, not /lib, on
# a merged-/usr system) and ask dpkg which package ships it.
while read -r p; do
	[ -f "$p" ] || continue
	readlink -f "$p"
	echo "$p"
done <"$tmp/paths" | sort -u >"$tmp/files"
# One line per file: "pkg[:arch], pkg[:arch]: /path".
xargs -a "$tmp/files" -d '\n' -n 200 dpkg -S 2>/dev/null |
	grep -v '^diversion ' | sort -u >"$tmp/owners" || true

# What STEP may use: its packages and their dependency closure, plus the base
# system.
deps_expand "$step" >"$tmp/declared"
if [ -s "$tmp/declared" ]; then
	# shellcheck disable=SC2046
	apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
		--no-breaks --no-replaces --no-enhances $(cat "$tmp/declared") 2>/dev/null |
		grep -vE '^[[:space:]]|^<' >"$tmp/closure" || true
fi
cat "$tmp/declared" >>"$tmp/closure"
dpkg-query -W -f='${Package}:${Architecture} ${Essential} ${Priority}\n' |
	awk '$2=="yes" || $3=="required" || $3=="important" {print $1}' >"$tmp/base"

native=$(dpkg --print-architecture)
# allowed PKG: PKG (NAME or NAME:ARCH, as dpkg -S prints it) may be used.
allowed() {
	local name=${1%%:*} arch=${1#*:}
	[ "$arch" != "$1" ] || arch=$native
	case $arch in "$native" | all) grep -qxF -e "$name" -e "$name:$native" -e "$name:all" "$tmp/closure" "$tmp/base" ;;
	*) grep -qxF "$name:$arch" "$tmp/closure" "$tmp/base" ;;
	esac
}

bad=()
while IFS= read -r line; do
	owners=${line%%: /*}
	ok=false
	IFS=', ' read -r -a list <<<"$owners"
	for pkg in "${list[@]}"; do
		[ -n "$pkg" ] && allowed "$pkg" && { ok=true; break; }
	done
	$ok || bad+=("$line")
done <"$tmp/owners"

if [ ${#bad[@]} -gt 0 ]; then
	echo "depscheck: step '$step' used files from Debian packages that tests/deps.sh does not name for it (nor are they dependencies of those it names, nor base system):" >&2
	printf '%s\n' "${bad[@]}" | awk -F': /' '{print $1}' | sort | uniq -c | while read -r n pkgs; do
		echo "  $pkgs ($n files, e.g. $(printf '%s\n' "${bad[@]}" | grep -F "$pkgs: /" | head -1 | sed 's/^.*: \//\//'))" >&2
	done
	echo "add them to the step in tests/deps.sh (tests/install-deps.sh installs that table)" >&2
	exit 1
fi
echo "depscheck: step '$step': $(wc -l <"$tmp/owners") files from Debian packages, all named in tests/deps.sh for it, their dependencies, or base system"
