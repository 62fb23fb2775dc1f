#!/usr/bin/env python3
"""Draws a flame graph (SVG) from `perf script` output.

    perf record -F 999 -g -p PID -- sleep 5
    perf script | /usr/bin/python3 tools/bench/flamegraph.py --title "..." > out.svg

Stacks are folded (root first, one count per sample), then drawn as nested boxes: the width of
a box is its share of the samples, children sit above their caller, boxes of one parent are in
name order. Hovering a box shows its name, samples and share (SVG <title>). Only the standard
library is used.
"""

import argparse
import html
import re
import sys
from collections import defaultdict

WIDTH = 1200
ROW = 16
TOP = 40
MIN_WIDTH_PX = 0.3  # narrower boxes are not drawn


def fold(lines, keep_threads):
    """perf script text -> {("root", ..., "leaf"): samples}."""
    stacks = defaultdict(int)
    header = None
    frames = []

    def flush():
        if header is None:
            return
        stack = list(reversed(frames))
        if keep_threads:
            stack.insert(0, header)
        if stack:
            stacks[tuple(stack)] += 1

    for raw in lines:
        line = raw.rstrip("\n")
        if not line.strip():
            flush()
            header, frames = None, []
            continue
        if not line[0].isspace():
            flush()
            frames = []
            # "comm  pid/tid  time: ... event:" -> the command name (thread name)
            header = line.split()[0]
            continue
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        symbol = parts[1]
        symbol = re.sub(r"\s+\([^()]*\)$", "", symbol)  # the "(dso)" suffix
        symbol = re.sub(r"\+0x[0-9a-f]+$", "", symbol)
        frames.append(simplify(symbol))
    flush()
    return stacks


def simplify(symbol):
    """Shortens C++ names: template arguments and parameter lists go."""
    out = []
    depth = 0
    for ch in symbol:
        if ch in "<(":
            if depth == 0:
                out.append("<>" if ch == "<" else "()")
            depth += 1
        elif ch in ">)":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    name = "".join(out).replace("()", "")
    return name if name else symbol


def build_tree(stacks):
    tree = {"name": "all", "value": 0, "children": {}}
    for stack, count in stacks.items():
        node = tree
        node["value"] += count
        for frame in stack:
            node = node["children"].setdefault(frame, {"name": frame, "value": 0, "children": {}})
            node["value"] += count
    return tree


def color(name):
    h = 0
    for ch in name:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    if "reprise" in name:
        return f"rgb({200 + h % 55},{120 + h % 60},{40 + h % 40})"
    if "grpc" in name or "absl" in name or "protobuf" in name:
        return f"rgb({80 + h % 40},{150 + h % 60},{200 + h % 55})"
    return f"rgb({210 + h % 45},{90 + h % 80},{50 + h % 30})"


def depth_of(node):
    if not node["children"]:
        return 1
    return 1 + max(depth_of(c) for c in node["children"].values())


def render(tree, title):
    total = max(tree["value"], 1)
    depth = depth_of(tree)
    height = TOP + depth * ROW + 20
    scale = (WIDTH - 20) / total
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'font-family="monospace" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="#fdfdf5"/>',
        f'<text x="10" y="20" font-size="14">{html.escape(title)} ({total} samples)</text>',
    ]

    def draw(node, x, level):
        w = node["value"] * scale
        if w < MIN_WIDTH_PX:
            return
        y = height - 20 - (level + 1) * ROW
        share = 100.0 * node["value"] / total
        label = html.escape(node["name"])
        out.append(f'<g><title>{label} ({node["value"]} samples, {share:.2f}%)</title>'
                   f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{ROW - 1}" '
                   f'fill="{color(node["name"])}" rx="1"/>')
        chars = int(w / 6.6)
        if chars >= 3:
            text = node["name"] if len(node["name"]) <= chars else node["name"][:chars - 2] + ".."
            out.append(f'<text x="{x + 2:.2f}" y="{y + ROW - 4}">{html.escape(text)}</text>')
        out.append("</g>")
        cx = x
        for child in sorted(node["children"].values(), key=lambda c: c["name"]):
            draw(child, cx, level + 1)
            cx += child["value"] * scale

    draw(tree, 10.0, 0)
    out.append("</svg>")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--title", default="flame graph")
    parser.add_argument("--threads", action="store_true",
                        help="one root per thread name (perf's comm)")
    parser.add_argument("--folded", help="also write the folded stacks here")
    args = parser.parse_args()
    stacks = fold(sys.stdin, args.threads)
    if not stacks:
        sys.exit("flamegraph.py: no stacks in the input (was perf record run with -g?)")
    if args.folded:
        with open(args.folded, "w") as f:
            for stack, count in sorted(stacks.items()):
                f.write(";".join(stack) + f" {count}\n")
    sys.stdout.write(render(build_tree(stacks), args.title))


if __name__ == "__main__":
    main()
