#!/usr/bin/python3
"""Draws one run of a profile trace (reprise-run --profile, reprise profile --trace) as a
timeline: a row per stream (and the host row with the run), a bar per step coloured by its
kernel, the largest kernels named in the legend.

    plot_trace.py TRACE.json OUT.png [--run N|median|fastest] [--title TEXT]

--run picks the run: its number, the run of median wall time (the default) or the fastest. Needs matplotlib
(tools/install-deps.sh --bench).
"""
import argparse
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("out")
    parser.add_argument("--run", default="median")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()

    with open(args.trace) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    rows = {e["tid"]: e["args"]["name"] for e in events
            if e["ph"] == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    runs = {e["args"]["run"]: e for e in spans if e["cat"] == "run"}
    if not runs:
        print("plot_trace: no runs in", args.trace, file=sys.stderr)
        return 1
    if args.run == "median":
        median = statistics.median_low(e["dur"] for e in runs.values())
        args.run = next(r for r, e in sorted(runs.items()) if e["dur"] == median)
    elif args.run == "fastest":
        args.run = min(runs, key=lambda r: runs[r]["dur"])
    elif args.run.isdigit():
        args.run = int(args.run)
    if args.run not in runs:
        print(f"plot_trace: no run {args.run} (runs 0 to {len(runs) - 1})", file=sys.stderr)
        return 1
    run = runs[args.run]
    origin = run["ts"]
    mine = [e for e in spans if e["args"].get("run") == args.run]

    def kernel(e):
        if e["cat"] == "step":
            return e["args"]["kernel"].replace("com.reprise.", "")
        return e["cat"] if e["cat"] != "kernel" else e["name"].replace("com.reprise.", "")

    totals = {}
    for e in mine:
        if e["cat"] != "run":
            totals[kernel(e)] = totals.get(kernel(e), 0.0) + e["dur"]
    ranked = sorted(totals, key=totals.get, reverse=True)
    palette = plt.get_cmap("tab10").colors
    colour = {k: palette[i % len(palette)] if i < len(palette) else (0.6, 0.6, 0.6)
              for i, k in enumerate(ranked)}

    order = sorted(rows)
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.7 * len(order)))
    for y, tid in enumerate(order):
        for e in mine:
            if e["tid"] != tid:
                continue
            start = (e["ts"] - origin) / 1e3
            width = max(e["dur"] / 1e3, 1e-4)
            c = (0.85, 0.85, 0.85) if e["cat"] == "run" else colour[kernel(e)]
            ax.barh(y, width, left=start, height=0.6, color=c, edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([rows[t] for t in order])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the run began")
    other = trace.get("otherData", {})
    ax.set_title(args.title or f"{other.get('model', args.trace)} ({other.get('mode', '?')}), "
                 f"run {args.run}: {run['dur'] / 1e3:.2f} ms")
    shown = ranked[:10]
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colour[k]) for k in shown],
              labels=[f"{k} ({100 * totals[k] / run['dur']:.0f}%)" for k in shown],
              loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(order) < 3 else -0.15),
              ncol=min(len(shown), 5), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"plot_trace: run {args.run} of {args.trace} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
