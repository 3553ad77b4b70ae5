# Shared by the scale scripts (sourced): the rule set, the agent's
# configuration on the simulated NIC, and the clock.

# scale_rules DIR N: DIR/rules-N.yaml, N ClassBench-style rules
# (tests/scale/genrules), generated once per DIR.
scale_rules() {
	local dir=$1 n=$2 here
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	if [[ ! -s $dir/rules-$n.yaml ]]; then
		(cd "$here" && go run ./tests/scale/genrules -n "$n") >"$dir/rules-$n.yaml"
	fi
}

# scale_config DIR PORT [RULEFILE]: DIR/scrubd.yaml, the agent on the
# simulated NIC (offload.backend sim, 4096 entries, software.engine dv with
# 2 workers, two protected /32s), its state in DIR/state, its API socket
# DIR/api.sock (bodies up to 64 MiB), metrics on 127.0.0.1:PORT, reading
# RULEFILE when one is given.
scale_config() {
	local dir=$1 port=$2 rules=${3:-}
	{
		cat <<CFG
node: scale
link_gbps: 100
state_dir: $dir/state
CFG
		if [[ -n $rules ]]; then
			printf 'rules:\n  files: [%s]\n  poll: 1s\n' "$rules"
		fi
		cat <<CFG
api:
  socket: $dir/api.sock
  max_body_bytes: 67108864
metrics:
  listen: 127.0.0.1:$port
protect:
  - prefix: 192.0.2.1/32
    note: management
  - prefix: 192.0.2.2/32
    note: management
offload:
  backend: sim
  max_entries: 4096
software:
  engine: dv
  workers: 2
placement:
  interval: 1s
CFG
	} >"$dir/scrubd.yaml"
}

# scale_ready PID PORT: waits until the agent PID answers /readyz with 200
# (status 0) or exits (status 1).
scale_ready() {
	while kill -0 "$1" 2>/dev/null; do
		if [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$2/readyz" || true) == 200 ]]; then
			return 0
		fi
		sleep 0.2
	done
	return 1
}

now() { date +%s.%N; }
