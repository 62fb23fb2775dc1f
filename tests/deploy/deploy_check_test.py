#!/usr/bin/python3
"""Static checks of deploy/, where no container engine runs: docker-compose and promtool
validate their files, the Grafana dashboard and the Kubernetes / KServe manifests parse and say
what deploy/README.md promises, the dashboard queries only documented metrics (docs/metrics.md,
itself checked against a real scrape by prometheus_test.py), and the Dockerfile builds with the
project's own recipe (the commands of tools/start-server.sh, no second one).

usage: deploy_check_test.py <source dir> [unittest args]
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dockerignore  # noqa: E402

SOURCE = os.path.abspath(sys.argv[1])
DEPLOY = os.path.join(SOURCE, "deploy")


def read(*parts):
    with open(os.path.join(SOURCE, *parts)) as f:
        return f.read()


def documented_metrics():
    return set(re.findall(r"^\| `([a-z_]+)`", read("docs", "metrics.md"), re.M))


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def promql_metric_names(expr):
    """Identifiers of `expr` that name series: not functions, keywords, labels or durations."""
    expr = re.sub(r'"[^"]*"', '""', expr)           # label values
    expr = re.sub(r"\{[^}]*\}", "", expr)           # matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)          # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?!\s*\()", expr))
    keywords = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
    return {n for n in names if n.lower() not in keywords}


def base_name(series):
    """A histogram's series (_bucket, _sum, _count) named by its family."""
    for suffix in ("_bucket", "_sum", "_count"):
        if series.endswith(suffix):
            return series[: -len(suffix)]
    return series


def compose_config(env_password=True):
    compose = shutil.which("docker-compose")
    env = dict(os.environ)
    env.pop("GRAFANA_ADMIN_PASSWORD", None)
    if env_password:
        env["GRAFANA_ADMIN_PASSWORD"] = "test-only"
    return subprocess.run([compose, "-f", os.path.join(DEPLOY, "docker-compose.yml"), "config"],
                          capture_output=True, timeout=60, cwd=DEPLOY, env=env)


def seconds(duration):
    """Seconds of a compose duration such as "40s", "1m30s"."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|m|s|ms|us)", str(duration))
    scale = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6}
    return sum(float(n) * scale[u] for n, u in parts)


class ComposeAndPrometheusConfig(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if shutil.which("docker-compose") is None:
            raise AssertionError("docker-compose is missing (tools/install-deps.sh --test)")
        r = compose_config()
        if r.returncode != 0:
            raise AssertionError("docker-compose config failed: " + r.stderr.decode())
        cls.config = yaml.safe_load(r.stdout)
        cls.services = cls.config["services"]

    def test_docker_compose_config(self):
        services = self.services
        self.assertEqual(set(services), {"reprise", "prometheus", "grafana"})
        ports = {str(p.get("target", p) if isinstance(p, dict) else p).split(":")[-1]
                 for p in services["reprise"]["ports"]}
        self.assertTrue({"8000", "8001", "8002"} <= ports, ports)
        self.assertTrue(any("/models" in str(v) for v in services["reprise"]["volumes"]))
        self.assertNotRegex(services["reprise"]["image"], r":latest$|^[^:]*$")  # a pinned tag

    def test_stop_grace_period_outlasts_the_drain(self):
        reprise = self.services["reprise"]
        shipped = yaml.safe_load(read("config", "reprise.yaml"))
        drain = shipped["shutdown"]["timeout_seconds"]
        command = reprise.get("command", [])
        if "--exit-timeout-secs" in command:
            drain = int(command[command.index("--exit-timeout-secs") + 1])
        self.assertGreater(seconds(reprise["stop_grace_period"]), drain)

    def test_limits_and_data_volumes(self):
        for name, service in self.services.items():
            self.assertIn("cpus", service, name)
            self.assertIn("mem_limit", service, name)
        def named_volume_at(service, target):
            return any(isinstance(v, dict) and v.get("type") == "volume" and
                       v.get("target") == target or
                       isinstance(v, str) and v.split(":")[1:2] == [target] and
                       not v.startswith(("/", "."))
                       for v in self.services[service]["volumes"])
        self.assertTrue(named_volume_at("prometheus", "/prometheus"),
                        self.services["prometheus"]["volumes"])
        self.assertTrue(named_volume_at("grafana", "/var/lib/grafana"),
                        self.services["grafana"]["volumes"])
        self.assertTrue({"models", "prometheus-data", "grafana-data"} <= set(self.config["volumes"]))

    def test_grafana_needs_a_login(self):
        env = self.services["grafana"]["environment"]
        self.assertEqual(str(env.get("GF_AUTH_ANONYMOUS_ENABLED")).lower(), "false")
        self.assertNotIn("GF_AUTH_ANONYMOUS_ORG_ROLE", env)
        self.assertEqual(env["GF_SECURITY_ADMIN_PASSWORD"], "test-only")  # from the environment
        # Without the password the stack does not start with a default one.
        r = compose_config(env_password=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("GRAFANA_ADMIN_PASSWORD", r.stderr.decode())

    def test_promtool_check_config(self):
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool (package prometheus) is missing")
        r = subprocess.run([promtool, "check", "config", os.path.join(DEPLOY, "prometheus.yml")],
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, (r.stdout + r.stderr).decode())
        prometheus = yaml.safe_load(read("deploy", "prometheus.yml"))
        targets = [t for job in prometheus["scrape_configs"]
                   for sc in job.get("static_configs", []) for t in sc["targets"]]
        self.assertIn("reprise:8002", targets)
        # The rules file is mounted next to the config in the container.
        self.assertEqual(prometheus["rule_files"], ["prometheus-alerts.yml"])
        mounts = self.services["prometheus"]["volumes"]
        self.assertTrue(any(str(m).endswith("/prometheus-alerts.yml:/etc/prometheus/"
                                            "prometheus-alerts.yml:ro") or
                            isinstance(m, dict) and m.get("target") ==
                            "/etc/prometheus/prometheus-alerts.yml" for m in mounts), mounts)


class AlertRules(unittest.TestCase):
    """deploy/prometheus-alerts.yml: promtool's check, the four alerts the stack promises, and
    promtool's unit tests (tests/deploy/prometheus_alerts_test.yml: each fires, none on a
    healthy series set)."""

    def setUp(self):
        self.promtool = shutil.which("promtool")
        self.assertIsNotNone(self.promtool, "promtool (package prometheus) is missing")

    def test_promtool_check_rules(self):
        r = subprocess.run([self.promtool, "check", "rules",
                            os.path.join(DEPLOY, "prometheus-alerts.yml")],
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, (r.stdout + r.stderr).decode())
        self.assertIn(b"SUCCESS: 4 rules found", r.stdout)

    def test_alerts_name_only_exported_metrics(self):
        documented = documented_metrics() | {"up"}
        rules = [rule for group in load_all(os.path.join(DEPLOY, "prometheus-alerts.yml"))[0][
            "groups"] for rule in group["rules"]]
        self.assertEqual({r["alert"] for r in rules},
                         {"RepriseDown", "RepriseHighErrorRate", "RepriseQueueTimeHigh",
                          "RepriseMemoryNearBudget"})
        for rule in rules:
            names = {base_name(n) for n in promql_metric_names(rule["expr"])}
            self.assertEqual(sorted(names - documented), [], rule["alert"])

    def test_promtool_test_rules(self):
        r = subprocess.run([self.promtool, "test", "rules",
                            os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "prometheus_alerts_test.yml")],
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, (r.stdout + r.stderr).decode())


class GrafanaDashboard(unittest.TestCase):
    def setUp(self):
        path = os.path.join(DEPLOY, "grafana", "dashboards", "reprise.json")
        with open(path) as f:
            self.dashboard = json.load(f)
        self.panels = self.dashboard["panels"]

    def test_queries_name_only_exported_metrics(self):
        documented = documented_metrics()
        self.assertGreater(len(documented), 20)
        exprs = [t["expr"] for p in self.panels for t in p.get("targets", [])]
        self.assertGreater(len(exprs), 10)
        for expr in exprs:
            names = {base_name(n) for n in promql_metric_names(expr)}
            self.assertTrue(names, expr)
            self.assertEqual(sorted(names - documented), [], "in query: " + expr)

    def test_shows_what_the_issue_asks(self):
        text = json.dumps(self.panels)
        for metric in ("reprise_requests_total", "reprise_request_duration_seconds_bucket",
                       "reprise_queue_duration_seconds", "reprise_batch_size",
                       "reprise_runtime_instance_replays_total",
                       "reprise_runtime_instance_captures_total",
                       "reprise_device_memory_used_bytes"):
            self.assertIn(metric, text)
        self.assertIn("histogram_quantile(0.99", text)
        self.assertIn("histogram_quantile(0.5", text)
        self.assertIn('outcome=\\"failure\\"', text)

    def test_every_panel_honours_the_model_variable(self):
        for p in self.panels:
            for t in p.get("targets", []):
                self.assertIn('model=~"$model"', t["expr"], p["title"])

    def test_no_hard_coded_job(self):
        # The scrape job differs per setup (compose, kubernetes-pods, KServe).
        for p in self.panels:
            for t in p.get("targets", []):
                self.assertNotRegex(t["expr"], r"\bjob\s*(=|!=|=~|!~)", p["title"])

    def test_rates_only_over_series_that_never_go_down(self):
        # rate / irate / increase assume a counter: a counter, or a histogram's buckets, sum and
        # count (every histogram here only grows; the capture-duration one counts every
        # capture, docs/metrics.md). A gauge under rate() reads a drop as a reset.
        types = dict(re.findall(r"^\| `([a-z_]+)` \| ([a-z]+) \|", read("docs", "metrics.md"),
                                re.M))
        self.assertEqual(types["reprise_capture_duration_seconds"], "histogram")
        for p in self.panels:
            for t in p.get("targets", []):
                for arg in re.findall(r"\b(?:rate|irate|increase)\(\s*([a-zA-Z_:]+)", t["expr"]):
                    self.assertIn(types.get(base_name(arg)), ("counter", "histogram"),
                                  f"{p['title']}: {arg}")

    def test_queries_parse(self):
        # Each query as a recording rule, Grafana's variables filled in: promtool parses them.
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool (package prometheus) is missing")
        rules = []
        for i, p in enumerate(self.panels):
            for t in p.get("targets", []):
                expr = (t["expr"].replace("$model", ".*").replace("$__rate_interval", "1m")
                        .replace("$__range", "1h"))
                rules.append({"record": f"panel_{i}_{t['refId']}", "expr": expr})
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
            f.flush()
            r = subprocess.run([promtool, "check", "rules", f.name], capture_output=True,
                               timeout=60)
        self.assertEqual(r.returncode, 0, (r.stdout + r.stderr).decode())

    def test_provisioning_points_at_the_dashboard(self):
        datasources = load_all(os.path.join(DEPLOY, "grafana", "provisioning", "datasources",
                                            "prometheus.yml"))[0]["datasources"]
        uids = {d["uid"] for d in datasources}
        for p in self.panels:
            if "datasource" in p:
                self.assertIn(p["datasource"]["uid"], uids, p["title"])
        providers = load_all(os.path.join(DEPLOY, "grafana", "provisioning", "dashboards",
                                          "reprise.yml"))[0]["providers"]
        compose = yaml.safe_load(read("deploy", "docker-compose.yml"))
        mounts = compose["services"]["grafana"]["volumes"]
        path = providers[0]["options"]["path"]
        self.assertTrue(any(m.startswith("./grafana/dashboards:" + path) for m in mounts), mounts)


class Kubernetes(unittest.TestCase):
    def docs(self):
        out = []
        for path in sorted(glob.glob(os.path.join(DEPLOY, "k8s", "*.yaml"))):
            out += load_all(path)
        return {d["kind"]: d for d in out}

    def test_manifests(self):
        docs = self.docs()
        self.assertTrue({"ConfigMap", "Deployment", "Service"} <= set(docs), set(docs))
        pod = docs["Deployment"]["spec"]["template"]
        annotations = pod["metadata"]["annotations"]
        self.assertEqual(annotations["prometheus.io/scrape"], "true")
        self.assertEqual(annotations["prometheus.io/port"], "8002")
        container = pod["spec"]["containers"][0]
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            self.assertEqual(container[probe]["grpc"]["port"], 8001, probe)
        ports = {p["containerPort"] for p in container["ports"]}
        self.assertEqual(ports, {8000, 8001, 8002})
        service_ports = {p["port"] for p in docs["Service"]["spec"]["ports"]}
        self.assertEqual(service_ports, {8000, 8001, 8002})
        self.assertEqual(docs["Service"]["spec"]["selector"],
                         docs["Deployment"]["spec"]["selector"]["matchLabels"])
        self.assertRegex(container["image"], r":[0-9][\w.-]*$")  # a pinned version tag

    def test_probes_differ_and_liveness_survives_a_drain(self):
        container = self.docs()["Deployment"]["spec"]["template"]["spec"]["containers"][0]
        live, ready = container["livenessProbe"], container["readinessProbe"]
        # Readiness is the health service "" (NOT_SERVING while draining); liveness asks the
        # service that stays SERVING until exit (server/server.h kLivenessService).
        self.assertEqual(live["grpc"]["service"], "liveness")
        self.assertEqual(container["startupProbe"]["grpc"]["service"], "liveness")
        self.assertIn(ready["grpc"].get("service", ""), ("",))
        self.assertIn('kLivenessService = "liveness"', read("server", "server.h"))
        self.assertGreaterEqual(live["failureThreshold"], 3)
        self.assertLessEqual(ready["periodSeconds"], live["periodSeconds"])

    def test_prestop_and_grace_period_cover_the_drain(self):
        docs = self.docs()
        spec = docs["Deployment"]["spec"]["template"]["spec"]
        container = spec["containers"][0]
        command = container["lifecycle"]["preStop"]["exec"]["command"]
        self.assertEqual(command[0], "/bin/sleep")
        pre_stop = int(command[1])
        self.assertGreaterEqual(pre_stop, 5)
        config = yaml.safe_load(docs["ConfigMap"]["data"]["reprise.yaml"])
        drain = config["shutdown"]["timeout_seconds"]
        self.assertGreater(spec["terminationGracePeriodSeconds"], pre_stop + drain)

    def test_restricted_pod_security(self):
        spec = self.docs()["Deployment"]["spec"]["template"]["spec"]
        self.assertTrue(spec["securityContext"]["runAsNonRoot"])
        self.assertNotEqual(spec["securityContext"].get("runAsUser"), 0)
        self.assertEqual(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault")
        (runtime,) = load_all(os.path.join(DEPLOY, "kserve", "serving-runtime.yaml"))
        for name, c in (("deployment", spec["containers"][0]),
                        ("serving runtime", runtime["spec"]["containers"][0])):
            sc = c["securityContext"]
            self.assertIs(sc["allowPrivilegeEscalation"], False, name)
            self.assertEqual(sc["capabilities"]["drop"], ["ALL"], name)
            self.assertNotIn("add", sc["capabilities"], name)
            self.assertIs(sc["readOnlyRootFilesystem"], True, name)
            self.assertEqual(sc["seccompProfile"]["type"], "RuntimeDefault", name)
            self.assertFalse(sc.get("privileged", False), name)
        # Scratch space on the read-only root: an emptyDir at /tmp.
        mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0]["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        self.assertIn("emptyDir", volumes[mounts["/tmp"]])

    def test_resources_match_the_thread_defaults(self):
        # The thread defaults follow the CPU limit (cgroup cpu.max): a limit must be set, the
        # request equal to it, and the config must not pin more threads than it.
        docs = self.docs()
        (runtime,) = load_all(os.path.join(DEPLOY, "kserve", "serving-runtime.yaml"))
        config = yaml.safe_load(docs["ConfigMap"]["data"]["reprise.yaml"])
        for name, c in (("deployment", docs["Deployment"]["spec"]["template"]["spec"]
                         ["containers"][0]), ("serving runtime", runtime["spec"]["containers"][0])):
            res = c["resources"]
            cpus = float(res["limits"]["cpu"])
            self.assertEqual(float(res["requests"]["cpu"]), cpus, name)
            self.assertIn("memory", res["limits"], name)
            self.assertLessEqual(config.get("runtime", {}).get("cpu_threads", 0), cpus, name)

    def test_configmap_holds_a_config_with_known_keys(self):
        config = yaml.safe_load(self.docs()["ConfigMap"]["data"]["reprise.yaml"])
        shipped = yaml.safe_load(read("config", "reprise.yaml"))
        for section, values in config.items():
            self.assertIn(section, shipped)
            self.assertEqual(sorted(set(values) - set(shipped[section])), [],
                             section)

    def test_kserve_serving_runtime(self):
        (runtime,) = load_all(os.path.join(DEPLOY, "kserve", "serving-runtime.yaml"))
        self.assertEqual(runtime["apiVersion"], "serving.kserve.io/v1alpha1")
        self.assertEqual(runtime["kind"], "ServingRuntime")
        spec = runtime["spec"]
        self.assertEqual(spec["protocolVersions"], ["grpc-v2"])
        self.assertIn("onnx", [f["name"] for f in spec["supportedModelFormats"]])
        container = spec["containers"][0]
        self.assertEqual(container["ports"][0]["containerPort"], 8001)
        self.assertEqual(container["ports"][0]["name"], "h2c")  # KServe's name for gRPC
        self.assertRegex(container["image"], r":[0-9][\w.-]*$")  # a pinned version tag
        (service,) = load_all(os.path.join(DEPLOY, "kserve", "inference-service.yaml"))
        self.assertEqual(
            service["metadata"]["annotations"]["serving.kserve.io/enable-prometheus-scraping"],
            "true")
        self.assertEqual(spec["annotations"]["prometheus.kserve.io/port"], "8002")


class Dockerfile(unittest.TestCase):
    def setUp(self):
        self.text = read("deploy", "Dockerfile")
        # Joined continuation lines, comments dropped.
        self.lines = [l.strip() for l in re.sub(r"\\\n", " ", self.text).splitlines()
                      if l.strip() and not l.strip().startswith("#")]

    def test_builds_with_the_project_recipe(self):
        # tools/start-server.sh on a fresh tree: install --serve, configure without tests,
        # build the two binaries. The image runs the same commands.
        script = read("tools", "start-server.sh")
        install = [l.strip() for l in script.splitlines() if l.startswith("tools/install-deps.sh")]
        self.assertEqual(install, ["tools/install-deps.sh --serve"])
        configure = re.findall(r"^\s*(cmake --preset release -DREPRISE_BUILD_TESTS=OFF)", script,
                               re.M)
        self.assertEqual(len(configure), 1, script)
        build = [l.strip() for l in script.splitlines() if l.startswith("cmake --build")]
        self.assertEqual(len(build), 1)
        runs = [l[len("RUN "):].strip() for l in self.lines if l.startswith("RUN ")]
        self.assertEqual(runs[0], install[0])
        self.assertEqual([c.strip() for c in runs[1].split("&&")], configure + build)

    def test_packages_come_before_the_sources(self):
        # Only the install script is copied before the packages are installed, so a source
        # edit reuses the cached package layer.
        build_stage = self.lines[: [l.startswith("FROM ") for l in self.lines].index(True, 1)]
        copy_all = build_stage.index("COPY . .")
        install = [i for i, l in enumerate(build_stage) if "install-deps.sh --serve" in l
                   and l.startswith("RUN ")]
        self.assertEqual(len(install), 1)
        self.assertLess(install[0], copy_all)
        for l in build_stage[: install[0]]:
            if l.startswith("COPY "):
                self.assertEqual(l.split()[1:], ["tools/install-deps.sh"] * 2)

    def test_serve_packages_pull_no_test_or_bench_tools(self):
        r = subprocess.run(["bash", os.path.join(SOURCE, "tools", "install-deps.sh"), "--serve",
                            "--list"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        serve = set(r.stdout.split())
        self.assertIn("libdnnl-dev", serve)
        self.assertIn("ocl-icd-opencl-dev", serve)  # libdnnl-dev's CMake config needs OpenCL
        for p in serve:
            self.assertNotRegex(p, r"torch|^npm$|^nodejs$|^prometheus$|gtest|gmock|benchmark|"
                                   r"^python3", p)
        r = subprocess.run(["bash", os.path.join(SOURCE, "tools", "install-deps.sh"), "--test",
                            "--list"], capture_output=True, text=True, timeout=30)
        test = set(r.stdout.split())
        self.assertTrue(serve < test)
        self.assertTrue({"libgtest-dev", "libgmock-dev", "prometheus", "docker-compose",
                         "clang-14", "libfuzzer-14-dev", "openssl"} <= test, test)

    def test_runtime_stage(self):
        froms = [l for l in self.lines if l.startswith("FROM ")]
        self.assertEqual(len(froms), 2)
        self.assertTrue(froms[0].startswith("FROM debian:12 "), froms[0])
        self.assertEqual(froms[1], "FROM debian:12-slim")
        runtime = self.lines[self.lines.index(froms[1]):]
        users = [l for l in runtime if l.startswith("USER ")]
        self.assertEqual(len(users), 1)
        self.assertNotIn(users[0].split()[1], ("root", "0"))
        copies = [l for l in runtime if l.startswith("COPY ")]
        sources = sorted(l.split()[-2] for l in copies)
        self.assertEqual(sources, ["/out/bin/", "/out/lib/", "config/reprise.yaml",
                                   "tools/models/repository"])

    def test_healthcheck_follows_the_configured_port(self):
        runtime = self.lines[[l.startswith("FROM ") for l in self.lines].index(True, 1):]
        (health,) = [l for l in runtime if l.startswith("HEALTHCHECK ")]
        (entry,) = [l for l in runtime if l.startswith("ENTRYPOINT ")]
        (env,) = [l for l in runtime if l.startswith("ENV ")]
        self.assertIn("REPRISE_GRPC_PORT=8001", env.split())
        # The server listens on $REPRISE_GRPC_PORT and the check asks that port.
        self.assertIn('--grpc-port \\"$REPRISE_GRPC_PORT\\"', entry)
        self.assertIn('reprise --addr "127.0.0.1:${REPRISE_GRPC_PORT}" healthcheck', health)
        self.assertIn('exec reprise-server', entry)  # PID 1 gets SIGTERM


class DockerIgnore(unittest.TestCase):
    """The build context, computed from the root .dockerignore as docker's legacy builder does
    (tests/deploy/dockerignore.py)."""

    def setUp(self):
        self.assertFalse(os.path.exists(os.path.join(DEPLOY, "Dockerfile.dockerignore")),
                         "BuildKit would prefer it to the root .dockerignore; keep one file")
        self.matcher = dockerignore.Matcher(read(".dockerignore"))

    def test_matcher_follows_the_legacy_rules(self):
        m = dockerignore.Matcher("# c\n/build\n**/__pycache__\n*.log\n!keep.log\na/*/c\n")
        self.assertTrue(m.excluded("build"))
        self.assertTrue(m.excluded("build/release/CMakeCache.txt"))  # below an excluded dir
        self.assertFalse(m.excluded("tools/build/x"))  # patterns are anchored at the root
        self.assertTrue(m.excluded("__pycache__"))  # `**/` matches zero directories
        self.assertTrue(m.excluded("a/b/__pycache__"))
        # A file below a directory that matched is skipped with the directory.
        self.assertEqual(m.context(["a/b/__pycache__/x.pyc", "a/b/y.py"]), ["a/b/y.py"])
        self.assertTrue(m.excluded("x.log"))
        self.assertFalse(m.excluded("keep.log"))  # the last match decides
        self.assertFalse(m.excluded("d/x.log"))  # `*` does not cross `/`
        self.assertTrue(m.excluded("a/b/c/d"))
        self.assertFalse(m.excluded("a/c"))

    def test_context_excludes_git_and_build_trees(self):
        tracked = self.source_files()
        host = [".git/HEAD", ".git/objects/ab/cdef", "build/release/CMakeCache.txt",
                "build/release/server/reprise-server", "build/asan/build.ninja",
                "tools/models/__pycache__/export_zoo.cpython-311.pyc"]
        context = set(self.matcher.context(tracked + host))
        for path in host:
            self.assertNotIn(path, context)
        for path in ("CMakeLists.txt", "CMakePresets.json", "tools/install-deps.sh",
                     "server/main.cc", "proto/grpc_service.proto", "config/reprise.yaml",
                     "tools/models/repository/mlp/1/model.onnx"):
            self.assertIn(path, tracked)
            self.assertIn(path, context)
        # Every CMakeLists.txt is in: the configure sees the whole tree.
        for path in tracked:
            if path.endswith("CMakeLists.txt") or path.endswith(".cmake"):
                self.assertIn(path, context)

    def source_files(self):
        # git's list where there is a checkout and git; else the tree as it is (a copy
        # without .git, as tools/check-clean-install.sh makes).
        try:
            r = subprocess.run(["git", "ls-files"], cwd=SOURCE, capture_output=True, text=True,
                               timeout=60)
            if r.returncode == 0 and r.stdout.split():
                return r.stdout.split()
        except FileNotFoundError:
            pass
        return self.walk()

    def walk(self):
        out = []
        for root, dirs, files in os.walk(SOURCE):
            dirs[:] = [d for d in dirs if d not in (".git", "build")]
            out += [os.path.relpath(os.path.join(root, f), SOURCE) for f in files]
        return out


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + sys.argv[2:], verbosity=2)
