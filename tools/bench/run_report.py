#!/usr/bin/python3
"""Runs every benchmark of docs/benchmarks.md and writes the report, its raw JSON and plots.

    /usr/bin/python3 tools/bench/run_report.py --build-dir build/release [--quick] [--out DIR]
                                               [--render-only]

(tools/bench/run-all.sh builds what is needed first and calls this.) Parts:
  1. Engine, in process: reprise-run (replay and eager) and ONNX Runtime (npm onnxruntime-node,
     installed into BUILD/ort with --ignore-scripts) on the zoo, same threads, run alternately,
     several repetitions; medians, min-max spread, ratio Reprise / ORT.
  2. Server: reprise-bench concurrency sweeps against reprise-server for the MLP and ResNet-18,
     from two temporary repositories (the same models without and with dynamic_batching).
  3. Transport floor: reprise-bench against reprise-echo at concurrency 1 with the same payload,
     alternated with the same run against reprise-server, several repetitions.
Full: DIR = docs (docs/benchmarks.md, docs/benchmarks.json, docs/benchmarks/*.png). --quick:
fewer models and repetitions, written to BUILD/bench/quick unless --out is given.
Every process started here is stopped in every path; every wait has a timeout; loopback only.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED_ZOO = os.path.join(ROOT, "tools", "models", "zoo")
ORT_VERSION = "1.30"

# name: (input dims without batch, output dims without batch)
SERVED = {"mlp": ([64], [10]), "resnet18": ([3, 224, 224], [1000])}
FULL = dict(models=["mlp", "mlp48", "resnet18", "resnet50", "mobilenet_v2", "transformer"],
            batches=[1, 8], threads=[1, 2], reps=3, budget_s=1.0,
            served=["mlp", "resnet18"], concurrency="1,2,4,8,16", window_ms=1000,
            max_windows=6, warmup_ms=500, floor_reps=3)
QUICK = dict(models=["mlp", "mlp48", "resnet18"], batches=[1, 8], threads=[1], reps=2,
             budget_s=0.3, served=["mlp"], concurrency="1,4", window_ms=500, max_windows=4,
             warmup_ms=300, floor_reps=2)

RUN_TIMEOUT_S = 600
children = []  # processes to stop on any exit


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def stop_children():
    for p in children:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    children.clear()


def on_signal(signum, _frame):
    stop_children()
    sys.exit(128 + signum)


def run_json(args, env=None, timeout=RUN_TIMEOUT_S, cpus=None):
    """Runs a command that prints one JSON object; returns it, or {"error": ...}. `cpus`: the
    CPUs it may run on (all of this process's when None)."""
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env,
                           preexec_fn=pin)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    if r.returncode != 0:
        return {"error": (r.stderr.strip() or r.stdout.strip())[-400:]}
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"error": "no JSON in the output"}


def thread_env(threads):
    return dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))


def row_cpus(threads):
    """The CPUs a row's runs may use: a one-thread row runs every runtime on the same single CPU
    (the lowest this process may use), since the cores of a VM can differ in speed (on the
    two-core machine of docs/benchmarks.md one core ran one-thread inference 18 % slower than
    the other), which made a one-thread ratio depend on where each process landed; rows of more
    threads use every CPU."""
    return {min(os.sched_getaffinity(0))} if threads == 1 else None


# ---- setup ----

def export_zoo(build, models):
    out = os.path.join(build, "zoo")
    todo = [m for m in models if not os.path.exists(os.path.join(SHIPPED_ZOO, m, "model.onnx"))]
    if todo:
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "models", "export_zoo.py"),
                        "--out", out, "--models", ",".join(todo), "--require-torch"],
                       check=True, env=thread_env(1), timeout=900)
    return {m: os.path.join(SHIPPED_ZOO if m not in todo else out, m) for m in models}


def install_ort(build):
    prefix = os.path.join(build, "ort")
    package = os.path.join(prefix, "node_modules", "onnxruntime-node", "package.json")
    if not os.path.exists(package):
        log(f"installing onnxruntime-node@{ORT_VERSION} into {prefix}")
        os.makedirs(prefix, exist_ok=True)
        subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund",
                        "--prefix", prefix, f"onnxruntime-node@{ORT_VERSION}"],
                       check=True, timeout=600)
    with open(package) as f:
        return prefix, json.load(f)["version"]


def make_inputs(build, zoo_dirs, batches, folder="inputs"):
    """BUILD/bench/<folder>/<model>_b<N>.npy: batch 1 is the zoo's input_b1.npy, larger
    batches are seeded random normal values of the same per-sample shape."""
    import numpy as np
    out = os.path.join(build, "bench", folder)
    os.makedirs(out, exist_ok=True)
    paths = {}
    for model, directory in zoo_dirs.items():
        x1 = np.load(os.path.join(directory, "input_b1.npy"))
        for b in batches:
            path = os.path.join(out, f"{model}_b{b}.npy")
            x = x1 if b == 1 else np.random.default_rng(b).standard_normal(
                (b,) + x1.shape[1:]).astype(np.float32)
            np.save(path, x)
            paths[(model, b)] = path
    return paths


# ---- 1. engine ----

def ort_args(ort_prefix, path, input_path, threads, extra):
    return ["node", os.path.join(ROOT, "tools", "bench", "ort_run.js"), "--ort-dir", ort_prefix,
            "--model", path, "--input", "input=" + input_path, "--threads", str(threads)] + extra


def engine_part(cfg, bins, zoo_dirs, inputs, ort_prefix, runtimes=("replay", "eager", "ort")):
    """Times every (model, batch, threads) row with each of `runtimes` (replay, eager: reprise-run
    modes; ort: ort_run.js), cfg["reps"] passes over all rows, the runtimes' order rotated."""
    rows = []
    for model in cfg["models"]:
        for batch in cfg["batches"]:
            for threads in cfg["threads"]:
                rows.append(dict(model=model, batch=batch, threads=threads,
                                 path=os.path.join(zoo_dirs[model], "model.onnx"),
                                 input=inputs[(model, batch)], runs={}))
    # Iterations per row from one short replay run, so that a measurement lasts ~budget_s.
    for row in rows:
        probe = run_json([bins["run"], "--model", row["path"], "--input", "input=" + row["input"],
                          "--threads", str(row["threads"]), "--iterations", "3", "--warmup", "1",
                          "--json"], env=thread_env(row["threads"]), cpus=row_cpus(row["threads"]))
        if "error" in probe and "ort" in runtimes:
            # Reprise cannot run it: ONNX Runtime's time still sets the budget.
            probe = dict(run_json(ort_args(ort_prefix, row["path"], row["input"], row["threads"],
                                           ["--iterations", "3", "--warmup", "1"]),
                                  env=thread_env(row["threads"]), cpus=row_cpus(row["threads"])),
                         error=probe["error"])
        # The probe's fastest run: a median of three is too easily moved by other processes.
        t = probe.get("min_us", 0) or 1e6
        row["iterations"] = int(min(20000, max(3, cfg["budget_s"] * 1e6 / t)))
        row["warmup"] = int(min(200, max(1, row["iterations"] // 10)))
        row["probe_error"] = probe.get("error")
    runtimes = list(runtimes)
    for rep in range(cfg["reps"]):
        for i, row in enumerate(rows):
            # Rotated order: each runtime goes first, second, ... in turn.
            k = (rep + i) % len(runtimes)
            for rt in runtimes[k:] + runtimes[:k]:
                env = thread_env(row["threads"])
                common = ["--iterations", str(row["iterations"]), "--warmup", str(row["warmup"])]
                if rt == "ort":
                    args = ort_args(ort_prefix, row["path"], row["input"], row["threads"], common)
                else:
                    args = [bins["run"], "--model", row["path"], "--input", "input=" + row["input"],
                            "--threads", str(row["threads"]), "--mode", rt, "--json"] + common
                result = run_json(args, env=env, cpus=row_cpus(row["threads"]))
                result.pop("outputs", None)
                result["loadavg_1m"] = os.getloadavg()[0]
                row["runs"].setdefault(rt, []).append(result)
                if "error" in result:
                    log(f"  {row['model']} b{row['batch']} t{row['threads']} {rt}: "
                        f"{result['error'][:200]}")
            log(f"engine rep {rep + 1}/{cfg['reps']}: {row['model']} b{row['batch']} "
                f"t{row['threads']} done")
    for row in rows:
        row["summary"] = {}
        for rt, runs in row["runs"].items():
            ok = [r for r in runs if "median_us" in r]
            if not ok:
                row["summary"][rt] = {"error": runs[0].get("error", "no run")}
                continue
            med = [r["median_us"] for r in ok]
            s = {"median_us": statistics.median(med), "min_us": min(med), "max_us": max(med),
                 "runs": len(ok), "load_us": statistics.median(r["load_us"] for r in ok)}
            if rt == "ort":
                s["first_run_us"] = statistics.median(r["first_run_us"] for r in ok)
            else:
                s["plan_us"] = statistics.median(r["plan_us"] for r in ok)
                s["capture_us"] = statistics.median(r["capture_us"] for r in ok)
            row["summary"][rt] = s
        ort = row["summary"].get("ort", {}).get("median_us")
        for rt in ("replay", "eager"):
            mine = row["summary"].get(rt, {}).get("median_us")
            row["summary"][f"{rt}_over_ort"] = mine / ort if mine and ort else None
    return rows


# ---- 2 and 3. server, transport floor ----

def write_repository(path, models, zoo_dirs, batching):
    if os.path.exists(path):
        shutil.rmtree(path)
    for m in models:
        dims, out_dims = SERVED[m]
        os.makedirs(os.path.join(path, m, "1"))
        shutil.copy(os.path.join(zoo_dirs[m], "model.onnx"), os.path.join(path, m, "1"))
        text = (f"name: {m}\nplatform: onnx\nmax_batch_size: 8\n"
                f"input:\n  - {{name: input, data_type: TYPE_FP32, dims: {dims}}}\n"
                f"output:\n  - {{name: output, data_type: TYPE_FP32, dims: {out_dims}}}\n"
                "instance_group:\n  - {count: 2, kind: KIND_CPU}\n")
        if batching:
            text += ("dynamic_batching:\n  preferred_batch_size: [4, 8]\n"
                     "  max_queue_delay_microseconds: 500\n")
        with open(os.path.join(path, m, "config.yaml"), "w") as f:
            f.write(text)


def start_server(args, log_path, port_re, ready_re, timeout_s=180):
    """Starts a server logging to a file; returns (process, port) once ready_re is logged."""
    log_file = open(log_path, "wb")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, env=env)
    log_file.close()
    children.append(proc)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        with open(log_path, "rb") as f:
            text = f.read()
        m = re.search(port_re, text)
        if m and re.search(ready_re, text):
            return proc, int(m.group(1))
        time.sleep(0.2)
    raise RuntimeError(f"{args[0]} did not start; see {log_path}")


def stop_server(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc in children:
        children.remove(proc)


def bench(bins, addr, model, out_json, cfg, concurrency, extra=()):
    args = [bins["bench"], "--model", model, "--addr", addr, "--concurrency", concurrency,
            "--measurement-interval-ms", str(cfg["window_ms"]), "--max-windows",
            str(cfg["max_windows"]), "--warmup-ms", str(cfg["warmup_ms"]), "--json", out_json,
            "--no-progress"] + list(extra)
    r = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-400:], "command": args}
    with open(out_json) as f:
        result = json.load(f)
    result["command"] = args
    return result


def server_part(cfg, bins, zoo_dirs, inputs, work):
    reprise_args = lambda repo: [bins["server"], "--config", os.path.join(ROOT, "config",
                                 "reprise.yaml"), "--model-repository", repo,
                                 "--grpc-address=127.0.0.1", "--grpc-port=0", "--http-port=0",
                                 "--metrics-port=0"]
    port_re, ready_re = rb"Started GRPCInferenceService at [^:]+:(\d+)", rb"server ready"
    repos = {}
    for variant, batching in (("off", False), ("on", True)):
        repos[variant] = os.path.join(work, f"repo_batching_{variant}")
        write_repository(repos[variant], cfg["served"], zoo_dirs, batching)
    results = {"curves": {}, "floor": []}
    # Transport floor: echo and reprise (batching off) alternated at concurrency 1.
    server, port = start_server(reprise_args(repos["off"]), os.path.join(work, "server_off.log"),
                                port_re, ready_re)
    echo, echo_port = start_server([bins["echo"], "--port", "0", "--max-seconds", "3600"],
                                   os.path.join(work, "echo.log"),
                                   rb"Started echo server at [^:]+:(\d+)", rb"Started echo")
    for rep in range(cfg["floor_reps"]):
        for m in cfg["served"]:
            payload = ["--input", "input=" + inputs[(m, 1)]]
            pair = [("echo", f"127.0.0.1:{echo_port}", "echo"), ("reprise", f"127.0.0.1:{port}", m)]
            if rep % 2:
                pair.reverse()
            for target, addr, name in pair:
                out = os.path.join(work, f"floor_{m}_{target}_{rep}.json")
                r = bench(bins, addr, name, out, cfg, "1", payload)
                results["floor"].append(dict(model=m, target=target, rep=rep, result=r))
        log(f"transport floor rep {rep + 1}/{cfg['floor_reps']} done")
    stop_server(echo)
    for variant in ("off", "on"):
        if variant == "on":
            stop_server(server)
            server, port = start_server(reprise_args(repos["on"]),
                                        os.path.join(work, "server_on.log"), port_re, ready_re)
        for m in cfg["served"]:
            out = os.path.join(work, f"curve_{m}_batching_{variant}.json")
            r = bench(bins, f"127.0.0.1:{port}", m, out, cfg, cfg["concurrency"])
            results["curves"][f"{m}/{variant}"] = r
            log(f"server curve {m}, batching {variant} done")
    stop_server(server)
    return results


# ---- report ----

def floor_summary(floor, models):
    rows = []
    for m in models:
        def pick(target, key, server=False):
            vals = []
            for f in floor:
                if f["model"] != m or f["target"] != target or "levels" not in f["result"]:
                    continue
                level = f["result"]["levels"][0]
                if server:
                    level = level.get("server") or {}
                if key in level:
                    vals.append(level[key])
            return vals
        echo, rep = pick("echo", "p50_us"), pick("reprise", "p50_us")
        echo_mean, rep_mean = pick("echo", "mean_us"), pick("reprise", "mean_us")
        infer = pick("reprise", "compute_infer_us", server=True)
        queue = pick("reprise", "queue_us", server=True)
        if not echo or not rep:
            rows.append(dict(model=m, error="no result"))
            continue
        rows.append(dict(model=m, runs=min(len(echo), len(rep)),
                         echo_p50_us=statistics.median(echo), echo_range=[min(echo), max(echo)],
                         reprise_p50_us=statistics.median(rep), reprise_range=[min(rep), max(rep)],
                         server_infer_us=statistics.median(infer) if infer else None,
                         server_queue_us=statistics.median(queue) if queue else None,
                         overhead_us=statistics.median(rep) - statistics.median(echo),
                         echo_mean_us=statistics.median(echo_mean),
                         reprise_mean_us=statistics.median(rep_mean),
                         overhead_mean_us=statistics.median(rep_mean) - statistics.median(echo_mean)))
    return rows


def plots(out_dir, engine_rows, server):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(os.path.join(out_dir, "benchmarks"), exist_ok=True)
    files = {}
    labels, replay, eager = [], [], []
    for row in engine_rows:
        s = row["summary"]
        if s.get("replay_over_ort") is None:
            continue
        labels.append(f"{row['model']} b{row['batch']} t{row['threads']}")
        replay.append(s["replay_over_ort"])
        eager.append(s.get("eager_over_ort") or 0)
    if labels:
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(labels) + 1.5))
        y = list(range(len(labels)))
        ax.barh([v - 0.2 for v in y], replay, height=0.4, label="Reprise replay / ORT")
        ax.barh([v + 0.2 for v in y], eager, height=0.4, label="Reprise eager / ORT")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(y)
        ax.set_yticklabels(labels)
        ax.invert_yaxis()
        ax.set_xlabel("median time per run, ratio to ONNX Runtime (< 1: Reprise is faster)")
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)
        fig.tight_layout()
        files["ratio"] = "benchmarks/engine_ratio.png"
        fig.savefig(os.path.join(out_dir, files["ratio"]), dpi=110, bbox_inches="tight")
        plt.close(fig)
    models = sorted({k.split("/")[0] for k in server["curves"]})
    if models:
        fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.5), squeeze=False)
        for ax, m in zip(axes[0], models):
            for variant, color in (("off", "tab:blue"), ("on", "tab:orange")):
                r = server["curves"].get(f"{m}/{variant}", {})
                levels = r.get("levels", [])
                if not levels:
                    continue
                x = [lv["inferences_per_s"] for lv in levels]
                ax.plot(x, [lv["p50_us"] / 1e3 for lv in levels], "o-", color=color,
                        label=f"p50, batching {variant}")
                ax.plot(x, [lv["p99_us"] / 1e3 for lv in levels], "s--", color=color,
                        label=f"p99, batching {variant}")
                for lv in levels:
                    ax.annotate(f"c{lv['level']:g}", (lv["inferences_per_s"], lv["p50_us"] / 1e3),
                                textcoords="offset points", xytext=(3, 3), fontsize=7)
            echo = [f["result"]["levels"][0]["p50_us"] for f in server["floor"]
                    if f["model"] == m and f["target"] == "echo" and "levels" in f["result"]]
            if echo:
                # A line, not a point: the echo's throughput would squash the model's axis.
                ax.axhline(statistics.median(echo) / 1e3, color="black", linestyle=":",
                           label="gRPC echo floor, p50 at concurrency 1")
            ax.set_yscale("log")
            ax.set_xlabel("throughput (inferences/s)")
            ax.set_ylabel("latency (ms, log scale)")
            ax.set_title(f"{m}: latency vs throughput, concurrency sweep")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        files["curves"] = "benchmarks/server_curves.png"
        fig.savefig(os.path.join(out_dir, files["curves"]), dpi=110)
        plt.close(fig)
    return files


def environment(build, ort_version):
    def cmd(args):
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return "?"
    cpu = re.search(r"Model name:\s*(.*)", cmd(["lscpu"]))
    mem = re.search(r"MemTotal:\s*(\d+)", open("/proc/meminfo").read())
    grpc = re.search(r'GRPC_CPP_VERSION_STRING "([^"]+)"',
                     open("/usr/include/grpcpp/version_info.h").read())
    try:
        debian = open("/etc/debian_version").read().strip()
    except OSError:
        debian = "?"
    return dict(cpu=cpu.group(1) if cpu else "?", cores=os.cpu_count(),
                memory_gib=round(int(mem.group(1)) / 2**20, 1) if mem else None,
                kernel=platform.release(), debian=debian,
                compiler=cmd(["g++", "--version"]).splitlines()[0],
                grpc=grpc.group(1) if grpc else "?", node=cmd(["node", "--version"]),
                onnxruntime_node=ort_version,
                commit=cmd(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]),
                branch=cmd(["git", "-C", ROOT, "rev-parse", "--abbrev-ref", "HEAD"]),
                dirty=bool(cmd(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"])),
                build_type=re.search(r"CMAKE_BUILD_TYPE:STRING=(.*)",
                                     open(os.path.join(build, "CMakeCache.txt")).read()).group(1))


def fmt_us(v):
    if v is None:
        return "-"
    return f"{v / 1e3:.2f} ms" if abs(v) >= 1e3 else f"{v:.1f} µs"


def write_markdown(path, data, files):
    cfg, env = data["config"], data["environment"]
    L = []
    L.append("# Benchmarks\n")
    L.append(f"> **{data['kind']}.** Measured {data['started']} – {data['finished']} UTC on "
             f"commit `{env['commit']}` (branch `{env['branch']}`"
             f"{', uncommitted changes' if env['dirty'] else ''}). "
             "Nothing here is asserted by a test.\n")
    L.append("Regenerate (one command, 20–25 minutes; `--quick` takes a few minutes and writes "
             "to `build/release/bench/quick/`):\n")
    L.append("```\ntools/bench/run-all.sh            # or: cmake --build --preset release "
             "--target bench\ntools/bench/run-all.sh --quick\n```\n")
    L.append("## Machine and versions\n")
    L.append(f"- CPU: {env['cpu']}, {env['cores']} cores, {env['memory_gib']} GiB; Linux "
             f"{env['kernel']}, Debian {env['debian']}")
    L.append(f"- {env['compiler']}, CMake build type {env['build_type']}; gRPC {env['grpc']}")
    L.append(f"- ONNX Runtime: npm `onnxruntime-node` {env['onnxruntime_node']} (CPU execution "
             f"provider) on node {env['node']}")
    la = data["loadavg"]
    L.append(f"- 1-minute load average: {la['start']:.2f} at the start, {la['engine_end']:.2f} "
             f"after the engine part, {la['end']:.2f} at the end. The machine is shared (other "
             "builds may run at the same time): the spread columns show how much runs moved.\n")
    if max(la.values()) > env["cores"]:
        L.append(f"> **Oversubscribed machine.** The load average reached {max(la.values()):.1f} "
                 f"on {env['cores']} cores during this run: every figure below includes waiting "
                 "for a core, and the spread columns show how far runs moved. Prefer the "
                 "1-thread rows for ratios, and rerun on an idle machine before quoting "
                 "absolute numbers.\n")

    L.append("## 1. Engine, in process: Reprise against ONNX Runtime\n")
    L.append(f"Each cell is the median over {cfg['reps']} runs (processes) of the per-run median "
             "time of one inference; `[min–max]` is the spread of those per-run medians. Reprise "
             "runs with `reprise-run` (replay: captured once, then replayed; eager: every step "
             "launched on the stream), ONNX Runtime with `tools/bench/ort_run.js` (intra-op "
             "threads as the row, inter-op 1, sequential, graph optimisations `all`). "
             "`OMP_NUM_THREADS` and `OPENBLAS_NUM_THREADS` equal the thread count for both. The "
             "three runtimes run alternately (order rotated every row and repetition). "
             f"Iterations per run: about {cfg['budget_s']} s of runs after a tenth as many "
             "warm-up runs, at least 3 and 1 (counts in the JSON). Ratio < 1: Reprise is faster.\n")
    L.append("| model | batch | threads | Reprise replay | Reprise eager | ONNX Runtime | "
             "replay / ORT | eager / ORT |")
    L.append("| --- | ---: | ---: | --- | --- | --- | ---: | ---: |")

    def cell(s):
        if "median_us" not in s:
            return "failed: " + s.get("error", "?")[:80].replace("|", "/").replace("\n", " ")
        return f"{fmt_us(s['median_us'])} [{fmt_us(s['min_us'])}–{fmt_us(s['max_us'])}]"

    for row in data["engine"]:
        s = row["summary"]
        ratio = lambda k: f"{s[k]:.2f}" if s.get(k) is not None else "-"
        L.append(f"| {row['model']} | {row['batch']} | {row['threads']} | "
                 f"{cell(s.get('replay', {}))} | {cell(s.get('eager', {}))} | "
                 f"{cell(s.get('ort', {}))} | {ratio('replay_over_ort')} | "
                 f"{ratio('eager_over_ort')} |")
    L.append("")
    if "ratio" in files:
        L.append(f"![Reprise / ONNX Runtime per row]({files['ratio']})\n")
    L.append("Load and first run (medians, batch 1, 1 thread): Reprise's load is "
             "`Model::LoadFile`; its first run plans and (in replay) captures; ONNX Runtime's "
             "load is session creation (graph optimisation included), its first run the first "
             "`session.run`.\n")
    L.append("| model | Reprise load | Reprise plan | Reprise capture | ORT load | ORT first run "
             "| (load + plan + capture) / ORT load |")
    L.append("| --- | --- | --- | --- | --- | --- | ---: |")
    for row in data["engine"]:
        if row["batch"] != cfg["batches"][0] or row["threads"] != cfg["threads"][0]:
            continue
        rp, o = row["summary"].get("replay", {}), row["summary"].get("ort", {})
        parts = [rp.get("load_us"), rp.get("plan_us"), rp.get("capture_us")]
        ready = sum(parts) if all(v is not None for v in parts) else None
        ratio = f"{ready / o['load_us']:.2f}" if ready and o.get("load_us") else "–"
        L.append(f"| {row['model']} | {fmt_us(rp.get('load_us'))} | {fmt_us(rp.get('plan_us'))} "
                 f"| {fmt_us(rp.get('capture_us'))} | {fmt_us(o.get('load_us'))} | "
                 f"{fmt_us(o.get('first_run_us'))} | {ratio} |")
    L.append("")

    L.append("## 2. Server: latency against throughput\n")
    L.append("`reprise-bench` against `reprise-server` (config/reprise.yaml: two streams per "
             "device, `OMP_NUM_THREADS=1`) on 127.0.0.1, client and server on the same two "
             "cores. Requests of batch 1, random data; one sweep per curve, concurrency "
             f"{cfg['concurrency']}; windows of {cfg['window_ms']} ms until three agree within "
             f"10% (at most {cfg['max_windows']}), after {cfg['warmup_ms']} ms of warm-up; the "
             "last three windows are reported. The two repositories hold the same models with "
             "`max_batch_size: 8` and two instances; `batching on` adds `dynamic_batching: "
             "{preferred_batch_size: [4, 8], max_queue_delay_microseconds: 500}`. "
             "`batch` is the mean batch the server executed (inferences / executions).\n")
    L.append(f"Batching in this build: {data['batching_state']}\n")
    for key, r in data["server"]["curves"].items():
        m, variant = key.split("/")
        L.append(f"**{m}, batching {variant}**\n")
        if "levels" not in r:
            L.append(f"failed: {r.get('error', '?')}\n")
            continue
        L.append("| concurrency | infer/s | p50 | p90 | p99 | max | server queue | server infer | "
                 "batch | stable |")
        L.append("| ---: | ---: | --- | --- | --- | --- | --- | --- | ---: | --- |")
        for lv in r["levels"]:
            srv = lv.get("server") or {}
            batch = (srv["inferences"] / srv["executions"]) if srv.get("executions") else None
            L.append(f"| {lv['level']:g} | {lv['inferences_per_s']:.1f} | {fmt_us(lv['p50_us'])} "
                     f"| {fmt_us(lv['p90_us'])} | {fmt_us(lv['p99_us'])} | "
                     f"{fmt_us(lv['max_us'])} | {fmt_us(srv.get('queue_us'))} | "
                     f"{fmt_us(srv.get('compute_infer_us'))} | "
                     f"{f'{batch:.2f}' if batch else '-'} | {'yes' if lv['stable'] else 'no'} |")
        L.append("")
    if "curves" in files:
        L.append(f"![Latency against throughput]({files['curves']})\n")

    L.append("## 3. Transport floor\n")
    L.append("`reprise-echo` (tools/bench/echo_server.cc) answers ModelInfer at once with the "
             "request's tensors, on the same gRPC callback API as reprise-server: a bare unary "
             "round trip with the same request payload (its response carries the input back; "
             "for these models that is more bytes than the model's output). reprise-bench at concurrency 1 "
             f"against it and against reprise-server (batching off) alternately, "
             f"{cfg['floor_reps']} runs each; medians of the p50s, [min–max] over runs. "
             "Overhead = Reprise − echo, by p50 and by mean; it includes the model's own compute. "
             "Means add up, so the mean overhead minus the server's mean compute (server infer, "
             "from ModelStatistics) is what serving costs beyond gRPC and the model; a negative "
             "value means that difference is below the run-to-run noise.\n")
    L.append("| model | echo p50 | Reprise p50 | overhead (p50) | overhead (mean) | server infer "
             "(mean) | beyond gRPC and model (mean) | server queue |")
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for f in data["floor_summary"]:
        if "error" in f:
            L.append(f"| {f['model']} | failed | | | | |")
            continue
        L.append(f"| {f['model']} | {fmt_us(f['echo_p50_us'])} [{fmt_us(f['echo_range'][0])}–"
                 f"{fmt_us(f['echo_range'][1])}] | {fmt_us(f['reprise_p50_us'])} "
                 f"[{fmt_us(f['reprise_range'][0])}–{fmt_us(f['reprise_range'][1])}] | "
                 f"{fmt_us(f['overhead_us'])} | {fmt_us(f['overhead_mean_us'])} | "
                 f"{fmt_us(f['server_infer_us'])} | "
                 f"{fmt_us(f['overhead_mean_us'] - (f['server_infer_us'] or 0))} | "
                 f"{fmt_us(f['server_queue_us'])} |")
    L.append("")
    L.append("## Commands and raw data\n")
    L.append(f"Raw results: `{os.path.basename(data['json_path'])}` beside this file (every run, "
             "with its command line for the server parts). The commands, by part:\n")
    L.append("```")
    L.append("# 1. engine (per row, alternated; N from a 3-iteration probe, W = N/10)")
    L.append("#    per row: " + ", ".join(f"{r['model']} b{r['batch']} t{r['threads']}: "
                                           f"N={r['iterations']} W={r['warmup']}"
                                           for r in data["engine"]))
    L.append("OMP_NUM_THREADS=T OPENBLAS_NUM_THREADS=T reprise-run --model M.onnx "
             "--input input=X.npy --threads T --mode replay|eager --iterations N --warmup W --json")
    L.append("OMP_NUM_THREADS=T OPENBLAS_NUM_THREADS=T node tools/bench/ort_run.js --ort-dir "
             "BUILD/ort --model M.onnx --input input=X.npy --threads T --iterations N --warmup W")
    for key, r in data["server"]["curves"].items():
        if "command" in r:
            L.append("# 2. " + key)
            L.append(" ".join(os.path.basename(a) if i == 0 else a
                              for i, a in enumerate(r["command"])))
            break
    L.append("# 3. floor: the same with --concurrency 1 --input input=X_b1.npy, against "
             "reprise-echo --port 0")
    L.append("```\n")
    L.append("Caveats: two cores for client and server together, so server curves flatten "
             "early and include the client's own CPU use; ONNX Runtime's times include node's "
             "binding (an async call per run), which matters only for the smallest models; "
             "ResNet/MobileNet weights are random (timing does not depend on them).\n")
    with open(path, "w") as f:
        f.write("\n".join(L))


def batching_state(server):
    formed = []
    for key, r in server["curves"].items():
        for lv in r.get("levels", []):
            srv = lv.get("server") or {}
            if srv.get("executions") and srv["inferences"] > srv["executions"]:
                formed.append((key, lv["level"], srv["inferences"] / srv["executions"]))
    if not formed:
        return ("no request was batched with another at any level (every execution ran one "
                "batch-1 request): the batcher formed no batch here, so the `on` curves measure "
                "the same path as the `off` curves.")
    best = max(formed, key=lambda f: f[2])
    return (f"batches were formed (largest mean batch {best[2]:.2f}, {best[0]} at concurrency "
            f"{best[1]:g}).")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", help="report folder (default: docs, or BUILD/bench/quick)")
    parser.add_argument("--render-only", action="store_true",
                        help="measure nothing: rewrite the report and plots from the folder's "
                             "benchmarks.json")
    args = parser.parse_args()
    build = os.path.abspath(args.build_dir)
    cfg = dict(QUICK if args.quick else FULL)
    out_dir = os.path.abspath(args.out or (os.path.join(build, "bench", "quick") if args.quick
                                           else os.path.join(ROOT, "docs")))
    if args.render_only:
        with open(os.path.join(out_dir, "benchmarks.json")) as f:
            data = json.load(f)
        files = plots(out_dir, data["engine"], data["server"])
        write_markdown(os.path.join(out_dir, "benchmarks.md"), data, files)
        log(f"report re-rendered: {os.path.join(out_dir, 'benchmarks.md')}")
        return 0
    bins = dict(run=os.path.join(build, "tools", "reprise-run"),
                bench=os.path.join(build, "tools", "reprise-bench"),
                echo=os.path.join(build, "tools", "reprise-echo"),
                server=os.path.join(build, "server", "reprise-server"))
    for name, path in bins.items():
        if not os.access(path, os.X_OK):
            sys.exit(f"run_report: {path} is missing; build it first (tools/bench/run-all.sh)")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    work = os.path.join(build, "bench", "work")
    os.makedirs(work, exist_ok=True)
    started = datetime.datetime.utcnow()
    load_start = os.getloadavg()[0]
    try:
        zoo_dirs = export_zoo(build, sorted(set(cfg["models"]) | set(cfg["served"])))
        ort_prefix, ort_version = install_ort(build)
        inputs = make_inputs(build, zoo_dirs, sorted(set(cfg["batches"]) | {1}))
        log("engine part")
        engine = engine_part(cfg, bins, zoo_dirs, inputs, ort_prefix)
        load_engine = os.getloadavg()[0]
        log("server part")
        server = server_part(cfg, bins, zoo_dirs, inputs, work)
    finally:
        stop_children()
    os.makedirs(out_dir, exist_ok=True)
    json_path = os.path.join(out_dir, "benchmarks.json")
    data = dict(kind=("Quick run (fewer models and repetitions)" if args.quick else
                      "Full run"),
                started=started.strftime("%Y-%m-%d %H:%M"),
                finished=datetime.datetime.utcnow().strftime("%H:%M"),
                config=cfg, environment=environment(build, ort_version),
                loadavg=dict(start=load_start, engine_end=load_engine,
                             end=os.getloadavg()[0]),
                engine=engine, server=server,
                floor_summary=floor_summary(server["floor"], cfg["served"]),
                batching_state=batching_state(server), json_path=json_path)
    # Paths relative to the repository root, so the report names no machine's folders.
    data = json.loads(json.dumps(data).replace(ROOT + "/", ""))
    with open(json_path, "w") as f:
        json.dump(data, f, indent=1)
    files = plots(out_dir, engine, server)
    write_markdown(os.path.join(out_dir, "benchmarks.md"), data, files)
    log(f"report: {os.path.join(out_dir, 'benchmarks.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
