#!/usr/bin/env bash
# ModelInfer p50 over TLS against plaintext, side by side in one run: two reprise-server
# processes (one with --grpc-use-ssl) over the example repository, reprise-bench at concurrency
# 1 on the mlp alternately against each, RUNS times. Certificates are made in a temporary
# directory with the openssl CLI. A benchmark, not a test (docs/benchmarks.md).
#   tools/bench/tls_vs_plain.sh [BUILD_DIR (default build/release)] [RUNS (default 3)]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
runs=${2:-3}
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=bench-ca -keyout "$work/ca.key" \
  -out "$work/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout "$work/server.key" \
  -out "$work/server.csr" 2>/dev/null
echo "subjectAltName=IP:127.0.0.1" >"$work/san.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
  -CAcreateserial -days 2 -extfile "$work/san.ext" -out "$work/server.pem" 2>/dev/null

# start NAME FLAGS...: a server on a free port; sets port_NAME once it listens and is ready.
start() {
  local name=$1
  shift
  OMP_NUM_THREADS=1 "$build/server/reprise-server" --model-repository tools/models/repository \
    --grpc-address=127.0.0.1 --grpc-port=0 --http-port=0 --allow-metrics=false \
    "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do
    grep -q "server ready" "$work/$name.log" && break
    sleep 0.1
  done
  local port
  port=$(sed -n 's/.*Started GRPCInferenceService at [^:]*:\([0-9]*\).*/\1/p' "$work/$name.log")
  [[ -n "$port" ]] || { cat "$work/$name.log" >&2; exit 1; }
  printf -v "port_$name" '%s' "$port"
}
start plain
start tls --grpc-use-ssl=true --grpc-server-cert "$work/server.pem" \
  --grpc-server-key "$work/server.key"

bench() {  # bench NAME RUN EXTRA...
  local name=$1 run=$2 port_var="port_$1"
  shift 2
  "$build/tools/reprise-bench" --model mlp --addr "127.0.0.1:${!port_var}" --concurrency 1 \
    --input input=tools/models/zoo/mlp/input_b1.npy --measurement-interval-ms 1000 \
    --max-windows 6 --warmup-ms 500 --no-progress --json "$work/$name-$run.json" "$@" >/dev/null
}
for run in $(seq "$runs"); do
  bench plain "$run"
  bench tls "$run" --root-certificates "$work/ca.pem"
done

/usr/bin/python3 - "$work" "$runs" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
def p50s(name):
    out = []
    for run in range(1, runs + 1):
        with open("%s/%s-%d.json" % (work, name, run)) as f:
            out.append(json.load(f)["levels"][0]["p50_us"])
    return out
plain, tls = p50s("plain"), p50s("tls")
for name, values in (("plaintext", plain), ("TLS", tls)):
    print("%-9s p50 median %.1f us  runs: %s" % (
        name, statistics.median(values), ", ".join("%.1f" % v for v in values)))
print("TLS - plaintext: %+.1f us" % (statistics.median(tls) - statistics.median(plain)))
PY
