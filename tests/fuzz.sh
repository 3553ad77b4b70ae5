#!/usr/bin/env bash
# Runs every Fuzz target in the module with the coverage-guided fuzzer for a
# short budget each (FUZZTIME, default 10s): go test -run '^$' -fuzz
# '^FuzzX$' -fuzztime 10s, one target at a time. The seed corpus (f.Add and
# the committed testdata/fuzz/FuzzX/ files, among them every input a past
# run found failing) also runs in every plain `go test`.
#
# A failing input is written by go test to the package's
# testdata/fuzz/FuzzX/ directory: fix the code, and commit that file as a
# regression case. The script runs every target, then fails if any did.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
targets=$(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's|^\./||; s|:func |:|' | sort)
if [ -z "$targets" ]; then
	echo "fuzz: no Fuzz targets found" >&2
	exit 1
fi
# deadline_only reports whether a failed run's output ($1) is that race
# alone: the failure's one message is "context deadline exceeded", and no
# input was written and nothing panicked.
deadline_only() {
	grep -q '^    context deadline exceeded$' "$1" &&
		! grep -qE 'Failing input written|panic:' "$1" &&
		[ "$(grep -c '^    ' "$1")" = "$(grep -c '^    context deadline exceeded$' "$1")" ]
}
failed=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
for t in $targets; do
	file=${t%%:*}
	target=${t##*:}
	pkg=./$(dirname "$file")
	echo "--- fuzz $pkg $target ($fuzztime)"
	ok=1
	for try in 1 2; do
		if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"; then
			ok=1
			break
		fi
		ok=0
		# Go 1.26's fuzz coordinator can fail a target with a bare "context
		# deadline exceeded" when -fuzztime ends while a worker is mid-input
		# (go.dev/issue/75804, fixed in Go 1.27): no input failed and none
		# was written. That, and only that, is run once more.
		if [ "$try" = 1 ] && deadline_only "$log"; then
			echo "fuzz: $target: the fuzzer's deadline race (go.dev/issue/75804), no failing input; running it once more"
			continue
		fi
		break
	done
	if [ "$ok" = 0 ]; then
		failed+=("$pkg $target")
		ls -1 "$(dirname "$file")/testdata/fuzz/$target/" 2>/dev/null | sed "s|^|    new input: $(dirname "$file")/testdata/fuzz/$target/|" || true
	fi
done
echo "fuzz: $(echo "$targets" | wc -l) targets in $(( $(date +%s) - start ))s"
if [ ${#failed[@]} -gt 0 ]; then
	printf 'fuzz: failed: %s\n' "${failed[@]}" >&2
	exit 1
fi
