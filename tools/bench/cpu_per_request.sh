#!/usr/bin/env bash
# Server CPU per request: utime + stime of a server process (/proc/PID/stat) over N requests of
# reprise-bench at concurrency 1, after a warm-up.
#   tools/bench/cpu_per_request.sh MODEL N BENCH_BIN -- SERVER_CMD...
# MODEL is the model name the server answers (echo for reprise-echo); the input is the zoo mlp's.
set -euo pipefail
model=$1 n=$2 bench=$3
shift 4  # the "--" too
root=$(cd "$(dirname "$0")/../.." && pwd)
input="input=$root/tools/models/zoo/mlp/input_b1.npy"
log=$(mktemp) json=$(mktemp)
"$@" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log" "$json"' EXIT
port=""
for _ in $(seq 100); do
  port=$(grep -o "\(GRPCInferenceService\|echo server\) at [0-9.]*:[0-9]*" "$log" | head -1 |
         grep -o "[0-9]*$" || true)
  [[ -n $port ]] && break
  sleep 0.2
done
[[ -n $port ]] || { echo "cpu_per_request: the server did not start" >&2; cat "$log" >&2; exit 1; }
common=(--model "$model" --addr "127.0.0.1:$port" --concurrency 1 --input "$input" --no-progress
        --no-server-stats)
"$bench" "${common[@]}" --measurement-interval-ms 500 --max-windows 3 --warmup-ms 300 >/dev/null
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
t0=$(ticks)
"$bench" "${common[@]}" --measurement-request-count "$n" --max-windows 3 --warmup-ms 0 \
  --json "$json" >/dev/null
t1=$(ticks)
/usr/bin/python3 - "$json" "$t0" "$t1" "$(getconf CLK_TCK)" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ticks, hz = int(sys.argv[3]) - int(sys.argv[2]), int(sys.argv[4])
n = d["client_inferences_ok"]
print(f"requests {n}, server CPU {ticks / hz:.2f} s, {ticks / hz / n * 1e6:.1f} us per request, "
      f"p50 {d['levels'][0]['p50_us']:.1f} us")
PY
