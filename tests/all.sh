#!/usr/bin/env bash
# Runs every scrubd test. As root it first installs what the tests need
# (tests/install-deps.sh); CI (.ci/run) runs exactly this script, with CI=true,
# under which a test that would skip for a missing tool fails instead.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh
# step NAME TITLE: print the step's title, then check that the Debian packages
# tests/deps.sh lists for NAME are installed (failing with their names if not).
step() { printf '\n=== %s (%s)\n' "${*:2}" "$(date +%T)"; deps_require "$1"; }

if [ "$(id -u)" = 0 ]; then
  printf '\n=== install test dependencies (%s)\n' "$(date +%T)"
  bash tests/install-deps.sh
fi

step none "gofmt"
bad=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$bad" ]; then echo "not gofmt'd:"; echo "$bad"; exit 1; fi

step vet "go vet (amd64, arm64, mlx5 tag)"
go vet ./...
GOARCH=arm64 go vet ./...
go vet -tags mlx5 ./...

step none "staticcheck"
go tool staticcheck ./...

step ebpf "generated eBPF objects are current"
# Under tests/depscheck.sh: clang and the headers it reads must come from
# packages tests/deps.sh names for this step.
bash tests/depscheck.sh ebpf -- go generate ./swpath/xdp/
git diff --exit-code -- swpath/xdp

step test "go test (amd64; root, namespaces, XDP, kernel lab under qemu)"
go test -count=1 -timeout 40m ./...

step none "fuzz: every Fuzz target for 10 s (tests/fuzz.sh)"
bash tests/fuzz.sh

step mutation "mutation check: each realistic bug injected into a copy must fail the tests (tests/mutation; the arm64 stubs' under qemu-user)"
go run ./tests/mutation

step none "go test -tags purego (the classifier's Go scans, which builds without its amd64 and arm64 stubs run)"
go vet -tags purego ./swpath/...
go tool staticcheck -tags purego ./swpath/classifier/...
go test -count=1 -timeout 20m -tags purego ./swpath/classifier/...

step race "go test -race (concurrent packages)"
go test -count=1 -race -short -timeout 30m ./swpath/pool/... ./swpath/classifier/... ./swpath/dv/... ./swpath/nicemu/... ./offload/sim/... ./agent/placement/... ./agent/store/... ./agent/api/... ./agent/sim/... ./agent/flowspec/bgpguard/...

step mlx5 "mlx5 cgo build and layout test against rdma-core's headers (amd64, and arm64 cross-built under qemu)"
go test -count=1 -tags mlx5 ./swpath/dv/...
CGO_ENABLED=1 GOARCH=arm64 CC=aarch64-linux-gnu-gcc go vet -tags mlx5 ./swpath/dv/...
# Compiled and linked for arm64 only: under qemu-user the test binary hangs
# in libibverbs, so the arm64 layout check is left to a real BlueField.
# Both cgo builds from an empty build cache under tests/depscheck.sh, so every
# C header and library they read is checked against this step's packages.
gc=$(mktemp -d)
bash tests/depscheck.sh mlx5 -- env GOCACHE="$gc" bash -c '
  go test -c -tags mlx5 -o /dev/null ./swpath/dv/verbs/ &&
  CGO_ENABLED=1 GOARCH=arm64 CC=aarch64-linux-gnu-gcc go test -c -tags mlx5 -o /dev/null ./swpath/dv/verbs/'
rm -rf "$gc"

step arm64 "arm64 under qemu-user"
GOARCH=arm64 go test -count=1 -short -timeout 30m -exec qemu-aarch64-static \
  ./arm/... ./x86/... ./swpath/... ./offload/... ./deploy/... \
  ./agent/plan/... ./agent/placement/... ./agent/store/... ./agent/protect/... ./agent/config/... ./agent/metrics/... ./agent/hwpath/...

step bench "benchmarks compile and run once"
# The figures are not kept; a failure or panic is shown.
blog=$(mktemp)
if ! go test -count=1 -run '^$' -bench . -benchtime 1x ./swpath/... ./offload/... >"$blog" 2>&1; then
  grep -E -B3 -A30 '^(--- FAIL|FAIL|panic:)' "$blog" | head -150
  exit 1
fi
rm -f "$blog"

step build "release binaries: static amd64/arm64 and the mlx5 cgo builds (deploy/build.sh)"
bash deploy/build.sh --require-mlx5 --out "$(mktemp -d)"

step none "Kubernetes manifests (separate module: k8s API types stay out of the agent)"
sc=$(go tool -n staticcheck)
(cd deploy/k8s/validate && go vet ./... && "$sc" ./... && go test -count=1 ./...)

echo
echo "all tests passed"
