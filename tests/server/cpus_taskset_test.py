#!/usr/bin/python3
"""reprise-server under `taskset -c 0`: the startup log says one CPU (the affinity mask) and one
inference thread, whatever the machine has. Starts the daemon on 127.0.0.1 with free ports and an
empty repository, reads its log until the line, and stops it with SIGTERM.

usage: cpus_taskset_test.py <taskset> <reprise-server>
"""
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import unittest

TASKSET, SERVER = sys.argv[1], sys.argv[2]


class CpusUnderTaskset(unittest.TestCase):
    def test_one_cpu_in_the_mask_gives_one_thread(self):
        with tempfile.TemporaryDirectory() as repo:
            proc = subprocess.Popen(
                [TASKSET, "-c", "0", SERVER, "--model-repository", repo, "--grpc-address",
                 "127.0.0.1", "--grpc-port", "0", "--http-port", "0", "--allow-metrics", "false"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            try:
                line = self.read_until(proc, "cpus: ", deadline=time.monotonic() + 30)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=30)
            self.assertIn("cpus: 1 CPU (affinity mask 1,", line)
            self.assertIn("inference threads 1 (the CPUs)", line)
            self.assertEqual(proc.returncode, 0)

    def read_until(self, proc, needle, deadline):
        # Unbuffered reads of the pipe: select() sees what is there.
        fd = proc.stdout.fileno()
        buf = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            buf += chunk
            for line in buf.decode(errors="replace").splitlines():
                if needle in line:
                    return line
        self.fail(f"no line with {needle!r} in the log:\n{buf.decode(errors='replace')}")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
