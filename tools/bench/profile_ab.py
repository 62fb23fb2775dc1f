#!/usr/bin/python3
"""Two reprise-run binaries compared step by step on one model, profiled alternately.

    /usr/bin/python3 tools/bench/profile_ab.py --before OLD/reprise-run --after NEW/reprise-run
        --model MODEL.onnx --input input=X.npy [--threads 1] [--rounds 6] [--iterations 60]
        [--top 4]

Each round runs both binaries (the order swapped every round) with --mode replay --profile
(one thread pinned to CPU 0 with taskset; more threads unpinned; OMP_NUM_THREADS set to the
thread count) and takes, from the trace, each step's median duration and the run's median.
Prints the median over the rounds of the run medians and of the sums of step medians, before
and after, and the steps that moved most (median over the rounds of each step's median).
Alternating the two binaries round by round keeps the comparison within one spell of a
machine whose speed drifts; a step's median over many runs moves less than a whole run's.
Steps are matched by their index and ONNX node, so both binaries must plan the model alike.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile


def profile(binary, args, path):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    pin = ["taskset", "-c", "0"] if args.threads == 1 else []
    cmd = pin + [binary, "--model", args.model, "--input", args.input, "--mode", "replay",
                 "--threads", str(args.threads), "--iterations", str(args.iterations),
                 "--warmup", str(max(1, args.iterations // 10)), "--profile", path]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit("%s failed (%d): %s" % (binary, done.returncode, done.stderr[-2000:]))
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    steps = collections.defaultdict(list)
    runs = []
    for e in events:
        if e.get("ph") != "X":
            continue
        if e.get("cat") == "step":
            steps[(e["args"]["step"], e["args"]["node"])].append(e["dur"])
        elif e.get("cat") == "run":
            runs.append(e["dur"])
    if not runs:
        sys.exit("%s: the trace has no runs" % binary)
    return statistics.median(runs), {k: statistics.median(v) for k, v in steps.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True, help="NAME=FILE.npy, as reprise-run takes it")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--top", type=int, default=4)
    args = parser.parse_args()
    if args.rounds < 1 or args.iterations < 1 or args.threads < 1:
        sys.exit("--rounds, --iterations and --threads must be positive")
    binaries = {"before": args.before, "after": args.after}
    run_medians = {k: [] for k in binaries}
    step_medians = {k: collections.defaultdict(list) for k in binaries}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for k in (["before", "after"] if r % 2 == 0 else ["after", "before"]):
                run, steps = profile(binaries[k], args, os.path.join(tmp, k + ".json"))
                run_medians[k].append(run)
                for step, us in steps.items():
                    step_medians[k][step].append(us)
    if set(step_medians["before"]) != set(step_medians["after"]):
        sys.exit("the two binaries planned different steps: compare runs, not steps")
    before = statistics.median(run_medians["before"])
    after = statistics.median(run_medians["after"])
    print("%s, %d thread(s), %d rounds of %d runs" % (args.model, args.threads, args.rounds,
                                                        args.iterations))
    print("run median (us): before %.0f after %.0f after/before %.3f" % (before, after,
                                                                          after / before))
    rows = []
    for step in step_medians["before"]:
        b = statistics.median(step_medians["before"][step])
        a = statistics.median(step_medians["after"][step])
        rows.append((a - b, step, b, a))
    rows.sort()
    sum_b = sum(r[2] for r in rows)
    sum_a = sum(r[3] for r in rows)
    print("sum of step medians (us): before %.0f after %.0f after/before %.3f" % (
        sum_b, sum_a, sum_a / sum_b))
    shown = rows[:args.top] + [r for r in rows[-args.top:] if r not in rows[:args.top]]
    for diff, (index, node), b, a in shown:
        print("  step %3d %-50s before %8.0f after %8.0f %+8.0f" % (index, node[-50:], b, a, diff))


if __name__ == "__main__":
    main()
