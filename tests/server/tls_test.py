#!/usr/bin/python3
"""TLS, mutual TLS, protocol-group access control and the per-connection stream limit of the
real reprise-server, driven by Python's gRPC client (and a raw HTTP/2 socket for the flood).

usage: tls_test.py <reprise-server> <dir with the generated *_pb2.py stubs> <reprise CLI>
                   <reprise-bench> <source dir>

The certificates are made here, at test time, with the `openssl` CLI in a temporary directory:
a CA, a server certificate for 127.0.0.1, a client certificate, a second CA with its own client
certificate, and an expired server certificate. None is committed.
"""
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import grpc
import numpy as np

SERVER, STUBS, CLI, BENCH, SOURCE = sys.argv[1:6]
sys.path.insert(0, STUBS)
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pb_grpc  # noqa: E402
import reprise_admin_pb2 as admin_pb  # noqa: E402
import reprise_admin_pb2_grpc as admin_grpc  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_log import read_until_started  # noqa: E402

REPO = os.path.join(SOURCE, "tools", "models", "repository")
CERTS = tempfile.TemporaryDirectory()


def cert_path(name):
    return os.path.join(CERTS.name, name)


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True, cwd=CERTS.name)


def make_ca(name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key",
            "-out", name + ".pem", "-days", "2", "-subj", "/CN=" + name)


def make_cert(name, ca, days="2"):
    """name.pem / name.key signed by `ca`, valid for 127.0.0.1 and localhost."""
    with open(cert_path("san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out",
            name + ".csr", "-subj", "/CN=" + name)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".pem", "-days", days, "-extfile", "san.ext")


def setUpModule():
    make_ca("ca")
    make_ca("other_ca")
    make_cert("server", "ca")
    make_cert("client", "ca")
    make_cert("other_client", "other_ca")
    make_cert("expired", "ca", days="-1")  # notAfter a day before notBefore: expired


def tearDownModule():
    CERTS.cleanup()


def read(name):
    with open(cert_path(name), "rb") as f:
        return f.read()


def tls_credentials(client=None):
    if client is None:
        return grpc.ssl_channel_credentials(root_certificates=read("ca.pem"))
    return grpc.ssl_channel_credentials(root_certificates=read("ca.pem"),
                                        private_key=read(client + ".key"),
                                        certificate_chain=read(client + ".pem"))


def tls_flags(mutual=False):
    flags = ["--grpc-use-ssl=true", "--grpc-server-cert", cert_path("server.pem"),
             "--grpc-server-key", cert_path("server.key")]
    if mutual:
        flags += ["--grpc-use-ssl-mutual=true", "--grpc-root-cert", cert_path("ca.pem")]
    return flags


class Server:
    """reprise-server on 127.0.0.1 (a free port) over a copy of the example repository."""

    def __init__(self, flags):
        self.repo = tempfile.TemporaryDirectory()
        shutil.copytree(REPO, self.repo.name, dirs_exist_ok=True)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            [SERVER, "--model-repository", self.repo.name, "--grpc-address=127.0.0.1",
             "--grpc-port=0", "--http-port=0", "--metrics-port=0"] + flags,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, bufsize=0)
        self.log, self.port, _ = read_until_started(self.proc, 30)
        self.addr = "127.0.0.1:%d" % (self.port or 0)

    def wait_ready(self, channel):
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        deadline = time.monotonic() + 60
        while not stub.ServerReady(pb.ServerReadyRequest(), timeout=10).ready:
            assert time.monotonic() < deadline, "server never became ready"
            time.sleep(0.05)
        return stub

    def read_until(self, pattern, seconds=30):
        """Reads the output until a line matches `pattern`; that line (None at the deadline)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 1.0)
            if not ready:
                continue
            line = self.proc.stdout.readline()
            if not line:
                return None
            self.log += line
            if re.search(pattern, line):
                return line.decode(errors="replace")
        return None

    def exit_log(self):
        """Waits for the process to end; its exit code and whole output."""
        out, _ = self.proc.communicate(timeout=30)
        return self.proc.returncode, (self.log + out).decode(errors="replace")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.repo.cleanup()


def infer_request():
    x = np.load(os.path.join(SOURCE, "tools", "models", "zoo", "mlp", "input_b1.npy"))
    req = pb.ModelInferRequest(model_name="mlp")
    t = req.inputs.add(name="input", datatype="FP32", shape=list(x.shape))
    del t
    req.raw_input_contents.append(x.astype(np.float32).tobytes())
    return req


class TlsTest(unittest.TestCase):
    def start(self, flags):
        server = Server(flags)
        self.addCleanup(server.close)
        self.assertIsNotNone(server.port, "server did not start: " + server.log.decode())
        return server

    def secure_stub(self, server, client=None):
        channel = grpc.secure_channel(server.addr, tls_credentials(client))
        self.addCleanup(channel.close)
        return server.wait_ready(channel)

    def test_tls_serves_and_refuses_plaintext(self):
        server = self.start(tls_flags())
        stub = self.secure_stub(server)
        self.assertTrue(stub.ServerLive(pb.ServerLiveRequest()).live)
        response = stub.ModelInfer(infer_request(), timeout=30)
        self.assertEqual(list(response.outputs[0].shape), [1, 10])
        plain = grpc.insecure_channel(server.addr)
        self.addCleanup(plain.close)
        with self.assertRaises(grpc.RpcError) as err:
            pb_grpc.GRPCInferenceServiceStub(plain).ServerLive(pb.ServerLiveRequest(), timeout=5)
        self.assertIn(err.exception.code(),
                      (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED))

    def test_sighup_checks_the_files_and_keeps_serving(self):
        server = self.start(tls_flags())
        stub = self.secure_stub(server)
        server.proc.send_signal(signal.SIGHUP)
        line = server.read_until(rb"SIGHUP:")
        self.assertIsNotNone(line, server.log.decode(errors="replace"))
        self.assertIn("the certificate files are valid", line)
        self.assertTrue(stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live)

    def test_mutual_tls_requires_a_client_certificate_of_the_ca(self):
        server = self.start(tls_flags(mutual=True))
        stub = self.secure_stub(server, client="client")
        self.assertTrue(stub.ServerLive(pb.ServerLiveRequest()).live)
        for client in (None, "other_client"):
            channel = grpc.secure_channel(server.addr, tls_credentials(client))
            self.addCleanup(channel.close)
            with self.assertRaises(grpc.RpcError, msg=str(client)) as err:
                pb_grpc.GRPCInferenceServiceStub(channel).ServerLive(pb.ServerLiveRequest(),
                                                                     timeout=5)
            self.assertIn(err.exception.code(),
                          (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED))

    def assert_startup_fails(self, flags, names):
        server = Server(flags)
        self.addCleanup(server.close)
        code, log = server.exit_log()
        self.assertNotEqual(code, 0, log)
        self.assertIsNone(server.port, log)
        self.assertIn(names, log)
        return log

    def test_missing_certificate_stops_startup(self):
        flags = tls_flags()
        flags[2] = cert_path("missing.pem")
        self.assert_startup_fails(flags, cert_path("missing.pem"))

    def test_key_not_matching_the_certificate_stops_startup(self):
        flags = tls_flags()
        flags[4] = cert_path("client.key")
        log = self.assert_startup_fails(flags, cert_path("client.key"))
        self.assertIn("does not match", log)

    def test_expired_certificate_stops_startup(self):
        flags = tls_flags()
        flags[2], flags[4] = cert_path("expired.pem"), cert_path("expired.key")
        self.assert_startup_fails(flags, cert_path("expired.pem"))


class AccessTest(unittest.TestCase):
    HEADER = ("x-reprise-key", "s3cret")

    def setUp(self):
        self.server = Server(["--model-control-mode=explicit", "--load-model=mlp",
                              "--grpc-restricted-protocol=model-repository,admin:X-Reprise-Key=s3cret",
                              "--grpc-max-concurrent-streams=4"])
        self.addCleanup(self.server.close)
        self.assertIsNotNone(self.server.port, self.server.log.decode())
        self.channel = grpc.insecure_channel(self.server.addr)
        self.addCleanup(self.channel.close)
        self.stub = self.server.wait_ready(self.channel)
        self.admin = admin_grpc.RuntimeInstancesStub(self.channel)

    def code_of(self, call, request, metadata=None):
        with self.assertRaises(grpc.RpcError) as err:
            call(request, metadata=metadata, timeout=10)
        return err.exception.code()

    def test_restricted_groups_need_the_header(self):
        unavailable = grpc.StatusCode.UNAVAILABLE
        index = pb.RepositoryIndexRequest()
        unload = pb.RepositoryModelUnloadRequest(model_name="mlp")
        self.assertEqual(self.code_of(self.stub.RepositoryIndex, index), unavailable)
        self.assertEqual(self.code_of(self.stub.RepositoryIndex, index,
                                      [("x-reprise-key", "s3cre")]), unavailable)
        self.assertEqual(self.code_of(self.stub.RepositoryIndex, index,
                                      [("x-reprise-key", "s3cret!")]), unavailable)
        self.assertEqual(self.code_of(self.stub.RepositoryModelUnload, unload), unavailable)
        self.assertEqual(self.code_of(self.admin.ListInstances, admin_pb.ListInstancesRequest()),
                         unavailable)
        # The model was not unloaded by the refused call; other groups still work.
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready)
        self.assertEqual(len(self.stub.ModelInfer(infer_request()).outputs), 1)
        self.assertEqual(self.stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp")).name, "mlp")
        # With the header, they work.
        names = [m.name for m in self.stub.RepositoryIndex(index, metadata=[self.HEADER]).models]
        self.assertIn("mlp", names)
        self.admin.ListInstances(admin_pb.ListInstancesRequest(), metadata=[self.HEADER])
        self.stub.RepositoryModelUnload(unload, metadata=[self.HEADER])
        self.assertEqual(self.code_of(self.stub.ModelInfer, infer_request()),
                         grpc.StatusCode.NOT_FOUND)  # unloaded

    def test_request_over_the_default_receive_limit_is_refused(self):
        req = pb.ModelInferRequest(model_name="mlp")
        req.inputs.add(name="input", datatype="FP32", shape=[65 << 12, 64])
        req.raw_input_contents.append(bytes(65 << 20))  # 65 MiB, over the 64 MiB default
        self.assertEqual(self.code_of(self.stub.ModelInfer, req),
                         grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live)

    def test_stream_flood_over_the_connection_limit_is_refused(self):
        streams = 14
        limit, answered, refused, closed = http2_flood(self.server.port, streams)
        self.assertEqual(limit, 4)
        # gRPC 1.51 answers a flood over the advertised limit by ending the connection (its
        # streams get grpc-status UNAVAILABLE); a server could also refuse each extra stream.
        # Either way no stream beyond the limit is served.
        self.assertLessEqual(len(answered), limit)
        self.assertTrue(closed or len(refused) >= streams - limit, (answered, refused, closed))
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live)


class AddressDumpTest(unittest.TestCase):
    def verbose_dump(self, flags):
        server = Server(flags)
        self.addCleanup(server.close)
        channel = grpc.insecure_channel(server.addr)
        self.addCleanup(channel.close)
        stub = server.wait_ready(channel)
        stub.ModelInfer(infer_request(), timeout=30)
        admin = admin_grpc.RuntimeInstancesStub(channel)
        listed = admin.ListInstances(admin_pb.ListInstancesRequest(model="mlp"))
        captured = [i for i in listed.instances if i.captures > 0]
        self.assertTrue(captured, listed)
        return admin.DumpInstance(admin_pb.DumpInstanceRequest(
            model="mlp", stream=captured[0].stream, shape_signature=captured[0].shape_signature,
            verbose=True)).json

    def test_verbose_dump_hides_addresses_unless_allowed(self):
        hidden = self.verbose_dump([])
        self.assertIn('"redacted"', hidden)
        self.assertIsNone(re.search(r'"0x[0-9a-f]+"', hidden))
        shown = self.verbose_dump(["--allow-address-dump=true"])
        self.assertIsNotNone(re.search(r'"0x[0-9a-f]+"', shown))


class MetricsAddressTest(unittest.TestCase):
    def test_metrics_bind_their_own_address(self):
        server = Server(["--metrics-address=127.0.0.2"])
        self.addCleanup(server.close)
        self.assertIsNotNone(server.port, server.log.decode())
        m = re.search(rb"Started Metrics Service at ([0-9.]+):(\d+)", server.log)
        self.assertIsNotNone(m, server.log.decode())
        self.assertEqual(m.group(1), b"127.0.0.2")
        port = int(m.group(2))
        with socket.create_connection(("127.0.0.2", port), timeout=10) as sock:
            sock.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            reply = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
        self.assertRegex(reply[:200], rb"^HTTP/1\.[01] 200 ")
        self.assertIn(b"\nprocess_cpu_seconds_total ", reply)
        with self.assertRaises(ConnectionRefusedError):  # not on the gRPC address
            socket.create_connection(("127.0.0.1", port), timeout=10).close()


class ServicesOffTest(unittest.TestCase):
    def test_admin_and_repository_services_can_be_turned_off(self):
        server = Server(["--admin-service=false", "--model-repository-service=false"])
        self.addCleanup(server.close)
        channel = grpc.insecure_channel(server.addr)
        self.addCleanup(channel.close)
        stub = server.wait_ready(channel)
        for call, request in ((stub.RepositoryIndex, pb.RepositoryIndexRequest()),
                              (admin_grpc.RuntimeInstancesStub(channel).ListInstances,
                               admin_pb.ListInstancesRequest())):
            with self.assertRaises(grpc.RpcError) as err:
                call(request, timeout=10)
            self.assertEqual(err.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertTrue(stub.ServerLive(pb.ServerLiveRequest()).live)


# A raw HTTP/2 client: gRPC's own client queues streams over the server's limit instead of
# sending them, so the flood is written by hand.
def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    # Literal header field without indexing, new name; lengths below 127, no Huffman.
    return bytes([0, len(name)]) + name + bytes([len(value)]) + value


def read_frames(sock, until):
    """Reads frames until until(frames) is true, the peer closes the connection (closed: True)
    or the socket goes quiet for 2 s. Returns (frames, closed)."""
    frames, buf = [], b""
    while not until(frames):
        ready, _, _ = select.select([sock], [], [], 2.0)
        if not ready:
            return frames, False
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return frames, True
        buf += chunk
        while len(buf) >= 9:
            length = struct.unpack(">I", b"\0" + buf[:3])[0]
            if len(buf) < 9 + length:
                break
            kind, flags = buf[3], buf[4]
            stream = struct.unpack(">I", buf[5:9])[0] & 0x7FFFFFFF
            frames.append((kind, flags, stream, buf[9:9 + length]))
            buf = buf[9 + length:]
    return frames, False


def http2_flood(port, streams):
    """Opens `streams` ServerLive streams at once (headers, no body) on one connection. Returns
    the server's advertised SETTINGS_MAX_CONCURRENT_STREAMS, the streams it answered with
    response headers, the streams it refused (RST_STREAM REFUSED_STREAM) and whether it closed
    the connection."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0))
        frames, _ = read_frames(sock, lambda f: any(k == 4 and not fl & 1 for k, fl, _, _ in f))
        limit = None
        for kind, flags, _, payload in frames:
            if kind == 4 and not flags & 1:
                for i in range(0, len(payload), 6):
                    ident, value = struct.unpack(">HI", payload[i:i + 6])
                    if ident == 3:  # SETTINGS_MAX_CONCURRENT_STREAMS
                        limit = value
        sock.sendall(frame(4, 1, 0))  # ACK: the limit is in force from here
        headers = b"".join(hpack_literal(n, v) for n, v in (
            (b":method", b"POST"), (b":scheme", b"http"),
            (b":path", b"/inference.GRPCInferenceService/ServerLive"),
            (b":authority", b"127.0.0.1"), (b"content-type", b"application/grpc"),
            (b"te", b"trailers")))
        sock.sendall(b"".join(frame(1, 4, 1 + 2 * i, headers) for i in range(streams)))
        frames, closed = read_frames(sock, lambda f: False)
        answered = {stream for kind, _, stream, _ in frames if kind == 1}
        refused = {stream for kind, _, stream, payload in frames
                   if kind == 3 and struct.unpack(">I", payload)[0] == 7}
        return limit, answered, refused, closed
    finally:
        sock.close()


class ToolsOverTlsTest(unittest.TestCase):
    """The reprise CLI and reprise-bench against a mutual-TLS server with a restricted group."""

    def setUp(self):
        self.server = Server(tls_flags(mutual=True) + [
            "--grpc-restricted-protocol=model-repository:x-reprise-key=s3cret"])
        self.addCleanup(self.server.close)
        self.assertIsNotNone(self.server.port, self.server.log.decode())
        channel = grpc.secure_channel(self.server.addr, tls_credentials("client"))
        self.addCleanup(channel.close)
        self.server.wait_ready(channel)
        self.tls = ["--root-certificates", cert_path("ca.pem"), "--private-key",
                    cert_path("client.key"), "--certificate-chain", cert_path("client.pem")]

    def run_tool(self, args):
        return subprocess.run(args, capture_output=True, timeout=120, text=True)

    def test_cli(self):
        cli = [CLI, "--addr", self.server.addr, "--json"]
        health = self.run_tool(cli + ["--ssl"] + self.tls + ["health"])
        self.assertEqual(health.returncode, 0, health.stderr)
        self.assertIn('"live": true', health.stdout.replace('"live":true', '"live": true'))
        plain = self.run_tool(cli + ["health"])
        self.assertEqual(plain.returncode, 1, plain.stdout)
        refused = self.run_tool(cli + self.tls + ["models"])
        self.assertEqual(refused.returncode, 1)
        self.assertIn("UNAVAILABLE", refused.stderr)
        models = self.run_tool(cli + self.tls + ["-H", "X-Reprise-Key=s3cret", "models"])
        self.assertEqual(models.returncode, 0, models.stderr)
        self.assertIn("mlp", models.stdout)

    def test_bench(self):
        out = tempfile.TemporaryDirectory()
        self.addCleanup(out.cleanup)
        report = os.path.join(out.name, "bench.json")
        result = self.run_tool([BENCH, "--addr", self.server.addr, "--model", "mlp",
                                "--ssl"] + self.tls + [
                                "--measurement-request-count", "20", "--max-windows", "3",
                                "--warmup-ms", "0", "--no-progress", "--json", report])
        self.assertEqual(result.returncode, 0, result.stderr + result.stdout)
        with open(report) as f:
            text = f.read()
        self.assertIn("mlp", text)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
