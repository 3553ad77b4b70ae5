#!/usr/bin/env bash
# 100k rules through the API, measured as a detector feeding the agent
# would see it: tests/scale/apiadd.sh SCRUBD_BINARY [RULES] [WORKDIR]
#   start `scrubd run --config` (simulated NIC as in agent100k.sh, no rule
#   file), `scrubd rules add` the RULES-rule file in one request, then add
#   ADDS (default 20) single rules one request each (the agent persists
#   each before it answers), change CHANGES (default 5) of them in place
#   (PUT /v1/rules/ID with another protocol: the same id keeps its place),
#   delete DELS (default 5) of them, read the state directory's size,
#   SIGTERM, start again on the same state and count the rules it restored.
# Prints one line of key=value figures: the bulk add's time, each single
# add's time (min/median/max), the placement rounds of the changes and of
# the deletes (from the agent's log), the state files' bytes, the
# restart's time to /readyz 200 and the rules listed after it (RULES +
# ADDS - DELS when every rule survived).
set -euo pipefail
bin=$(realpath "$1")
n=${2:-100000}
dir=${3:-$(mktemp -d /tmp/apiadd.XXXXXX)}
adds=${ADDS:-20}
dels=${DELS:-5}
changes=${CHANGES:-5}
mkdir -p "$dir/state"
. "$(dirname "$0")/lib.sh"
scale_rules "$dir" "$n"
port=$((20000 + RANDOM % 20000))
scale_config "$dir" "$port"
rm -rf "$dir/state"/* "$dir/api.sock" "$dir/run.log"
f() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b-a}'; }
start() {
	"$bin" run --config "$dir/scrubd.yaml" >>"$dir/run.log" 2>&1 &
	pid=$!
	local t0
	t0=$(now)
	if scale_ready $pid "$port"; then
		ready_s=$(f "$t0" "$(now)")
		return
	fi
	echo "agent exited before ready"; tail "$dir/run.log"; exit 1
}
trap 'kill -9 $pid 2>/dev/null || true' EXIT
start
b0=$(now); "$bin" rules --socket "$dir/api.sock" add "$dir/rules-$n.yaml" >/dev/null; b1=$(now)
times=()
for i in $(seq 1 "$adds"); do
	echo "{id: api-one-$i, action: drop, match: {dst: 198.51.100.$i/32, proto: udp}}" >"$dir/one.yaml"
	a0=$(now); "$bin" rules --socket "$dir/api.sock" add "$dir/one.yaml" >/dev/null; a1=$(now)
	times+=("$(f "$a0" "$a1")")
done
# mmm NAME VALUES...: NAME_min=, NAME_median=, NAME_max= of the values.
mmm() {
	local name=$1 sorted
	shift
	sorted=$(printf '%s\n' "$@" | sort -g)
	echo "${name}_min=$(head -1 <<<"$sorted") ${name}_median=$(sed -n "$((($# + 1) / 2))p" <<<"$sorted") ${name}_max=$(tail -1 <<<"$sorted")"
}
# rounds FROM_LINE: the took= of the delta rounds logged after that line
# of the log, in ms.
rounds() {
	tail -n +"$1" "$dir/run.log" | grep 'round=delta' | sed -n 's/.* took=\([0-9.]*\)\(µs\|ms\|s\).*/\1 \2/p' | awk '{print ($2 == "ms") ? $1 : ($2 == "s") ? $1 * 1000 : $1 / 1000}'
}
sleep 1.5 # the last add's placement round, logged before the changes'
l0=$(($(wc -l <"$dir/run.log") + 1))
for i in $(seq 1 "$changes"); do
	curl -sf --unix-socket "$dir/api.sock" -X PUT -H 'Content-Type: application/json' \
		-d "{\"id\": \"api-one-$i\", \"action\": \"drop\", \"match\": {\"dst\": \"198.51.100.$i/32\", \"proto\": \"tcp\"}}" \
		"http://scrubd/v1/rules/api-one-$i" >/dev/null
	sleep 1.5 # the placement round that re-places it
done
mapfile -t ctook < <(rounds "$l0")
dtimes=()
for i in $(seq 1 "$dels"); do
	d0=$(now); "$bin" rules --socket "$dir/api.sock" delete "api-one-$i" >/dev/null; d1=$(now)
	dtimes+=("$(f "$d0" "$d1")")
	sleep 1.5 # the placement round that takes it out (placement.interval 1s)
done
mapfile -t took < <(grep 'round=delta' "$dir/run.log" | grep ' removed=1 ' | sed -n 's/.* took=\([0-9.]*\)\(µs\|ms\|s\).*/\1 \2/p' | awk '{print ($2 == "ms") ? $1 : ($2 == "s") ? $1 * 1000 : $1 / 1000}')
state_kb=$(du -sk "$dir/state" | cut -f1)
kill -TERM $pid; wait $pid || true
start
listed=$(("$("$bin" rules --socket "$dir/api.sock" list | wc -l)" - 1))
kill -TERM $pid; wait $pid || true
trap - EXIT
echo "rules=$n bulk_add_s=$(f "$b0" "$b1") adds=$adds $(mmm add_s "${times[@]}") changes=$changes $(mmm change_round_ms "${ctook[@]:-none}") dels=$dels $(mmm del_s "${dtimes[@]}") $(mmm remove_round_ms "${took[@]:-none}") state_kb=$state_kb restart_ready_s=$ready_s rules_after_restart=$listed load=\"$(cut -d' ' -f1-3 /proc/loadavg)\""
