#!/usr/bin/env bash
# KServe v2 over HTTP/REST (binary and JSON tensors) against gRPC, in one run: one
# reprise-server over the example repository, reprise-bench on the mlp at each concurrency
# over gRPC, HTTP with binary tensors and HTTP with JSON tensors, alternating, RUNS times; the
# p50 of each and the ratio to gRPC's. A benchmark, not a test (docs/benchmarks.md).
#   tools/bench/http_vs_grpc.sh [BUILD_DIR (default build/release)] [RUNS (default 3)]
#                               [CONCURRENCIES (default 1,16)]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
runs=${2:-3}
levels=${3:-1,16}
work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

OMP_NUM_THREADS=1 "$build/server/reprise-server" --model-repository tools/models/repository \
  --grpc-address=127.0.0.1 --grpc-port=0 --http-port=0 --allow-metrics=false \
  >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  grep -q "server ready" "$work/server.log" && break
  sleep 0.1
done
grpc_port=$(sed -n 's/.*Started GRPCInferenceService at [^:]*:\([0-9]*\).*/\1/p' "$work/server.log")
http_port=$(sed -n 's/.*Started HTTPService at [^:]*:\([0-9]*\).*/\1/p' "$work/server.log")
[[ -n $grpc_port && -n $http_port ]] || { cat "$work/server.log" >&2; exit 1; }

bench() {  # NAME FLAGS...: appends "NAME CONCURRENCY P50" lines to $work/p50
  local name=$1
  shift
  "$build/tools/reprise-bench" -m mlp --concurrency "$levels" --measurement-interval-ms 1000 \
    --warmup-ms 500 --max-windows 6 --no-progress --csv "$work/$name.csv" "$@" >/dev/null
  /usr/bin/python3 - "$work/$name.csv" "$name" >>"$work/p50" <<'PY'
import csv, sys
for row in csv.DictReader(open(sys.argv[1])):
    print(sys.argv[2], row["concurrency"], row["p50_us"])
PY
}

for run in $(seq "$runs"); do
  echo "run $run/$runs" >&2
  bench grpc --addr "127.0.0.1:$grpc_port"
  bench http_binary -i http --addr "127.0.0.1:$http_port"
  bench http_json -i http --addr "127.0.0.1:$http_port" --input-tensor-format json \
    --output-tensor-format json
done

/usr/bin/python3 - "$work/p50" <<'PY'
import statistics, sys
p50 = {}
for line in open(sys.argv[1]):
    name, level, value = line.split()
    p50.setdefault((name, int(float(level))), []).append(float(value))
levels = sorted({level for _, level in p50})
print(f"{'concurrency':>11} {'protocol':>12} {'p50_us (median of runs)':>24} {'x gRPC':>7}")
for level in levels:
    base = statistics.median(p50[("grpc", level)])
    for name in ("grpc", "http_binary", "http_json"):
        m = statistics.median(p50[(name, level)])
        print(f"{level:>11} {name:>12} {m:>24.1f} {m / base:>7.2f}")
PY
