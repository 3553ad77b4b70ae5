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
failed=()
start=$(date +%s)
for t in $targets; do
	file=${t%%:*}
	target=${t##*:}
	pkg=./$(dirname "$file")
	echo "--- fuzz $pkg $target ($fuzztime)"
	if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"; then
		failed+=("$pkg $target")
		ls -1 "$(dirname "$file")/testdata/fuzz/$target/" 2>/dev/null | sed "s|^|    new input: $(dirname "$file")/testdata/fuzz/$target/|" || true
	fi
done
echo "fuzz: $(echo "$targets" | wc -l) targets in $(( $(date +%s) - start ))s"
if [ ${#failed[@]} -gt 0 ]; then
	printf 'fuzz: failed: %s\n' "${failed[@]}" >&2
	exit 1
fi
