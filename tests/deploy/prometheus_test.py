#!/usr/bin/python3
"""The daemon's metrics as Prometheus sees them: starts the real reprise-server and Debian's
Prometheus on 127.0.0.1 (free ports, a temporary TSDB), sends N inferences and waits, by bounded
polling of Prometheus's HTTP API, until the target is up and the success counter equals N.
Also: `promtool check metrics` over a real scrape, and docs/metrics.md lists exactly the
families the daemon exports.

Also the `reprise healthcheck` command the container's HEALTHCHECK runs.

usage: prometheus_test.py <reprise-server> <python stubs dir> <source dir> <reprise CLI>
                          [unittest args]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

SERVER, STUBS, SOURCE, CLI = sys.argv[1:5]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_daemon import Daemon, free_port, infer_mlp, metric_families, stop  # noqa: E402

REPO = os.path.join(SOURCE, "tools", "models", "repository")
DOCS = os.path.join(SOURCE, "docs", "metrics.md")
N = 7


def documented_metrics():
    """Metric names in the first column of docs/metrics.md's tables."""
    with open(DOCS) as f:
        return set(re.findall(r"^\| `([a-z_]+)`", f.read(), re.M))


def query(port, promql):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": promql}))
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError("query %r: %r" % (promql, body))
    return body["data"]["result"]


class PrometheusTest(unittest.TestCase):
    def test_prometheus_scrapes_the_request_count(self):
        prometheus = shutil.which("prometheus")
        self.assertIsNotNone(prometheus, "Debian's prometheus package is missing "
                                         "(tools/install-deps.sh installs it)")
        with Daemon(SERVER, REPO) as daemon, tempfile.TemporaryDirectory() as tmp:
            infer_mlp(STUBS, daemon.grpc_port, N)
            config = os.path.join(tmp, "prometheus.yml")
            with open(config, "w") as f:
                f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                        "scrape_configs:\n  - job_name: reprise\n    static_configs:\n"
                        "      - targets: ['127.0.0.1:%d']\n" % daemon.metrics_port)
            port = free_port()
            log = open(os.path.join(tmp, "prometheus.log"), "wb")
            proc = subprocess.Popen(
                [prometheus, "--config.file=" + config,
                 "--web.listen-address=127.0.0.1:%d" % port,
                 "--storage.tsdb.path=" + os.path.join(tmp, "tsdb")],
                stdout=log, stderr=subprocess.STDOUT)
            try:
                up, count = None, None
                deadline = time.monotonic() + 90
                while time.monotonic() < deadline:
                    self.assertIsNone(proc.poll(), "prometheus exited")
                    try:
                        up = query(port, 'up{job="reprise"}')
                        count = query(port, 'sum(reprise_requests_total'
                                            '{job="reprise",model="mlp",outcome="success"})')
                    except OSError:
                        pass  # not listening yet
                    if (up and up[0]["value"][1] == "1" and count
                            and float(count[0]["value"][1]) == N):
                        break
                    time.sleep(0.5)  # polling interval, not an assertion's wait
            finally:
                stop(proc)
                log.close()
            with open(os.path.join(tmp, "prometheus.log"), "rb") as f:
                plog = f.read().decode(errors="replace")[-3000:]
            self.assertTrue(up, "Prometheus never reported the target:\n" + plog)
            self.assertEqual(up[0]["value"][1], "1", plog)
            self.assertTrue(count, "no reprise_requests_total in Prometheus:\n" + plog)
            self.assertEqual(float(count[0]["value"][1]), N)

    def test_promtool_check_metrics(self):
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool (package prometheus) is missing")
        with Daemon(SERVER, REPO) as daemon:
            infer_mlp(STUBS, daemon.grpc_port, 3)
            text = daemon.scrape()
        r = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, (r.stdout + r.stderr).decode())
        self.assertEqual((r.stdout + r.stderr).decode().strip(), "")

    def test_docs_list_every_exported_metric(self):
        with Daemon(SERVER, REPO, ["--grpc-inflight-metric=true"]) as daemon:
            infer_mlp(STUBS, daemon.grpc_port, 2)
            text = daemon.scrape()
        exported = {n for n in metric_families(text) if n.startswith(("reprise_", "process_"))}
        documented = documented_metrics()
        self.assertEqual(sorted(exported - documented), [], "exported but not in docs/metrics.md")
        self.assertEqual(sorted(documented - exported), [], "in docs/metrics.md, not exported")

    def test_healthcheck_cli(self):
        with Daemon(SERVER, REPO) as daemon:
            addr = "127.0.0.1:%d" % daemon.grpc_port
            r = subprocess.run([CLI, "--addr", addr, "healthcheck"], capture_output=True,
                               timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            self.assertEqual(r.stdout.decode().strip(), "SERVING")
        # The daemon is gone: the check fails (UNAVAILABLE), it does not hang.
        r = subprocess.run([CLI, "--addr", addr, "healthcheck"], capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("UNAVAILABLE", r.stderr.decode())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + sys.argv[5:], verbosity=2)
