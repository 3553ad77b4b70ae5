#!/usr/bin/env bash
# The agent with a 100k-rule file on the simulated NIC, measured as a user
# would: tests/scale/agent100k.sh SCRUBD_BINARY [RULES] [WORKDIR]
#   start `scrubd run --config` (offload.backend sim, 4096 entries,
#   software.engine dv with 2 workers), poll /readyz every 200 ms, read the
#   peak RSS (VmHWM) and the CPU used (utime+stime) at ready, time
#   `scrubd rules list` (table and --json)
#   and `--limit 1000`, one /metrics scrape, time `scrubd rules add` of one rule (the agent
#   saves its state before it answers), then SIGTERM and time the exit.
# Prints one line of key=value figures. RULES defaults to 100000.
# MEMORY_LIMIT_MB=N adds memory_limit_mb: N to the config, GC_PERCENT=N
# gc_percent: N. IDLE_S=S then leaves the agent alone S seconds after the
# add and prints the CPU it used meanwhile (utime+stime from
# /proc/PID/stat, in CPUs) and its RSS at the end. TERM_AFTER=S
# sends SIGTERM S seconds after the start instead (mid-load) and prints
# how long the agent took to exit, its VmHWM and whether it was ready.
set -euo pipefail
bin=$(realpath "$1")
n=${2:-100000}
dir=${3:-$(mktemp -d /tmp/agent100k.XXXXXX)}
mkdir -p "$dir/state"
. "$(dirname "$0")/lib.sh"
scale_rules "$dir" "$n"
port=$((20000 + RANDOM % 20000))
scale_config "$dir" "$port" "$dir/rules-$n.yaml"
if [[ ${MEMORY_LIMIT_MB:-0} != 0 ]]; then
	echo "memory_limit_mb: $MEMORY_LIMIT_MB" >>"$dir/scrubd.yaml"
fi
if [[ -n ${GC_PERCENT:-} ]]; then
	echo "gc_percent: $GC_PERCENT" >>"$dir/scrubd.yaml"
fi
rm -rf "$dir/state"/* "$dir/api.sock"
t0=$(now)
"$bin" run --config "$dir/scrubd.yaml" >"$dir/run.log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
if [[ -n ${TERM_AFTER:-} ]]; then
	sleep "$TERM_AFTER"
	code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz" || true)
	hwm=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
	s0=$(now); kill -TERM $pid; rc=0; wait $pid || rc=$?; s1=$(now)
	trap - EXIT
	echo "rules=$n term_after_s=$TERM_AFTER readyz_at_term=$code vmhwm_mb=$((hwm / 1024)) sigterm_exit_s=$(awk -v a="$s0" -v b="$s1" 'BEGIN{printf "%.2f", b-a}') exit_status=$rc load=\"$(cut -d' ' -f1-3 /proc/loadavg)\""
	exit 0
fi
ready=""
if scale_ready $pid "$port"; then
	ready=$(now)
fi
[[ -n $ready ]] || { echo "agent exited before ready"; tail "$dir/run.log"; exit 1; }
hwm_ready=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
cpu_ready=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' /proc/$pid/stat)
rss_ready=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
sleep 2 # placement's first round is done; the list reads a quiet agent
l0=$(now); "$bin" rules --socket "$dir/api.sock" list >"$dir/list.txt"; l1=$(now)
j0=$(now); "$bin" rules --socket "$dir/api.sock" --json list >"$dir/list.json"; j1=$(now)
p0=$(now); "$bin" rules --socket "$dir/api.sock" --limit 1000 list >/dev/null 2>&1; p1=$(now)
m0=$(now); curl -s -o /dev/null "http://127.0.0.1:$port/metrics"; m1=$(now)
echo '{id: scale-add, action: drop, match: {dst: 198.51.100.7/32, proto: udp}}' >"$dir/one.yaml"
a0=$(now); "$bin" rules --socket "$dir/api.sock" add "$dir/one.yaml" >/dev/null; a1=$(now)
hwm_list=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
rss_steady=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
idle=""
if [[ ${IDLE_S:-0} != 0 ]]; then
	cpu() { awk '{print $14 + $15}' /proc/$pid/stat; }
	c0=$(cpu); sleep "$IDLE_S"; c1=$(cpu)
	idle="idle_s=$IDLE_S idle_cpu=$(awk -v a="$c0" -v b="$c1" -v s="$IDLE_S" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.3f", (b-a)/hz/s}') vmrss_idle_mb=$(($(awk '/VmRSS/{print $2}' /proc/$pid/status) / 1024)) vmhwm_idle_mb=$(($(awk '/VmHWM/{print $2}' /proc/$pid/status) / 1024))"
fi
s0=$(now); kill -TERM $pid; wait $pid || true; s1=$(now)
trap - EXIT
f() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
echo "rules=$n ready_s=$(f "$t0" "$ready") cpu_ready_s=$cpu_ready vmhwm_ready_mb=$((hwm_ready / 1024)) vmrss_ready_mb=$((rss_ready / 1024))" \
	"list_s=$(f "$l0" "$l1") list_lines=$(wc -l <"$dir/list.txt") list_json_s=$(f "$j0" "$j1") list_json_mb=$(($(stat -c %s "$dir/list.json") / 1048576))" \
	"page1000_s=$(f "$p0" "$p1") api_add_s=$(f "$a0" "$a1") metrics_s=$(f "$m0" "$m1") vmhwm_after_list_mb=$((hwm_list / 1024)) vmrss_after_list_mb=$((rss_steady / 1024)) sigterm_exit_s=$(f "$s0" "$s1")" \
	${idle:+"$idle"} "load=\"$(cut -d' ' -f1-3 /proc/loadavg)\""
