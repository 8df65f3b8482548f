"""Tests of the Python client against a real bloom-server (started on port 0, temp data dir).

Run by ctest with BLOOM_SERVER_BIN and PYTHONPATH set; needs Debian's /usr/bin/python3.
"""

import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
from datetime import timedelta

# gRPC's backup poller off, before gRPC starts: a client that needs it to reconnect after a
# restart never does (ReconnectTest), and no other test may lean on it either.
os.environ["GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS"] = "0"

import grpc  # noqa: E402 (after the environment it reads)

import example
from bloom_client import BloomClient
from bloom.v1 import bloom_pb2  # after bloom_client, which finds the generated modules


class ServerFixture:
    """A bloom-server on port 0 with a fresh temp data dir.

    Its log is printed to stderr when it exits non-zero on SIGTERM, and when a test fails
    while it runs (see LoggedTestCase), so a rare failure can be diagnosed from the CI log.
    """

    all = []  # every fixture of this run, for LoggedTestCase

    def __init__(self, extra_args=()):
        self.dir = tempfile.TemporaryDirectory(prefix="bloom-py-")
        self.log_path = os.path.join(self.dir.name, "log")
        self.final_log = None  # the log's text, kept when stop() removes the directory
        self.stopped_at = None
        ServerFixture.all.append(self)
        port_file = os.path.join(self.dir.name, "port")
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(
            [os.environ["BLOOM_SERVER_BIN"], "--listen=127.0.0.1:0",
             f"--data_dir={self.dir.name}/data", f"--port_file={port_file}", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.time() > deadline:
                self.print_log("bloom-server did not start")
                raise RuntimeError("bloom-server did not start")
            time.sleep(0.01)
        with open(port_file) as f:
            self.target = f"127.0.0.1:{int(f.readline())}"
            self.metrics_port = None
            for line in f:
                if line.startswith("metrics "):
                    self.metrics_port = int(line.split()[1])

    def log_text(self):
        if self.final_log is not None:
            return self.final_log
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def print_log(self, why, tail_bytes=16384):
        text = self.log_text()[-tail_bytes:]
        print(f"---- bloom-server log ({why}) ----\n{text}---- end of log ----",
              file=sys.stderr, flush=True)

    def kill(self):
        """kill -9, as a crash or an evicted pod."""
        self.proc.kill()
        self.proc.wait(timeout=20)
        self.log.close()
        self.final_log = self.log_text()
        self.stopped_at = time.monotonic()
        self.dir.cleanup()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=20)
        self.log.close()
        self.final_log = self.log_text()
        self.stopped_at = time.monotonic()
        if code != 0:
            self.print_log(f"exit status {code} after SIGTERM")
        self.dir.cleanup()
        return code


def _run_threads(work, count):
    """Runs work(0) ... work(count - 1) on threads of their own and waits for all of them."""
    workers = [threading.Thread(target=work, args=(t,)) for t in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


class LoggedTestCase(unittest.TestCase):
    """A test case that prints the logs of the servers it ran against when it fails."""

    def run(self, result=None):
        if result is None:
            return super().run(result)
        started = time.monotonic()
        problems = len(result.failures) + len(result.errors)
        super().run(result)
        if len(result.failures) + len(result.errors) > problems:
            for fixture in ServerFixture.all:
                if fixture.stopped_at is None or fixture.stopped_at >= started:
                    fixture.print_log(f"{self.id()} failed")
        return result


class BloomClientTest(LoggedTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerFixture()
        cls.client = BloomClient(cls.server.target, batch_size=100)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        assert cls.server.stop() == 0

    def test_reserve_add_check_stats(self):
        self.assertTrue(self.client.reserve("py:users", capacity=1000, error_rate=0.01))
        self.assertFalse(self.client.reserve("py:users", capacity=1000, error_rate=0.01))
        self.assertEqual(self.client.add("py:users", ["alice", b"bob", 1001, "alice"]),
                         [True, True, True, False])
        # str, bytes and decimal int forms of an item are the same item.
        self.assertEqual(self.client.might_contain("py:users", [b"alice", "bob", "1001", "carol"]),
                         [True, True, True, False])
        stats = self.client.stats("py:users")
        self.assertEqual(stats.items_added, 3)
        self.assertEqual(stats.spec.expansion, 2)

    def test_window_and_idle_ttl(self):
        self.assertTrue(self.client.reserve("py:seen", capacity=1000, error_rate=0.01,
                                            window=timedelta(days=7), idle_ttl=3600))
        self.assertFalse(self.client.reserve("py:seen", capacity=1000, error_rate=0.01,
                                             window=timedelta(days=7), window_slices=8,
                                             idle_ttl=timedelta(hours=1)))
        self.assertEqual(self.client.add("py:seen", ["u1"]), [True])
        stats = self.client.stats("py:seen")
        self.assertEqual(stats.spec.window.ToTimedelta(), timedelta(days=7))
        self.assertEqual(stats.spec.window_slices, 8)
        self.assertGreater(stats.expires_at.seconds, stats.created_at.seconds)
        self.assertTrue(stats.HasField("window_start"))
        with self.assertRaises(grpc.RpcError) as caught:
            self.client.reserve("py:bad", capacity=10, error_rate=0.01, window=0.5)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("spec.window", caught.exception.details())
        self.assertEqual(self.client.add("py:made", ["x"], create_if_missing={
            "capacity": 100, "error_rate": 0.01, "window": timedelta(hours=1)}), [True])
        self.assertEqual(self.client.stats("py:made").spec.window.seconds, 3600)

    def test_batches_are_split_in_order(self):
        items = [f"item-{i}" for i in range(1050)]  # 11 requests of at most 100
        added = self.client.add("py:batched", items,
                                create_if_missing={"capacity": 5000, "error_rate": 0.001})
        self.assertEqual(len(added), 1050)
        self.assertTrue(all(self.client.might_contain("py:batched", items)))

    def test_errors_keep_their_grpc_code(self):
        with self.assertRaises(grpc.RpcError) as missing:
            self.client.might_contain("py:missing", ["x"])
        self.assertEqual(missing.exception.code(), grpc.StatusCode.NOT_FOUND)
        # ... unless the caller treats a missing filter as empty; nothing is created.
        self.assertEqual(
            self.client.might_contain("py:missing", ["x", b"y"], absent_if_missing=True),
            [False, False])
        with self.assertRaises(grpc.RpcError) as still_missing:
            self.client.stats("py:missing")
        self.assertEqual(still_missing.exception.code(), grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(grpc.RpcError) as bad:
            self.client.reserve("py:bad", capacity=10, error_rate=1.5)
        self.assertEqual(bad.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("error_rate", bad.exception.details())
        with self.assertRaises(TypeError):
            self.client.add("py:users", [1.5])

    def test_list_export_import_delete(self):
        self.client.reserve("py:list:a", capacity=10, error_rate=0.1)
        self.client.reserve("py:list:b", capacity=10, error_rate=0.1)
        self.client.add("py:list:a", ["x", "y"])
        self.assertEqual([f.name for f in self.client.list("py:list:")],
                         ["py:list:a", "py:list:b"])
        dump = self.client.export("py:list:a")
        copy = self.client.import_dump("py:list:copy", dump)
        self.assertEqual(copy.items_added, 2)
        self.assertEqual(self.client.might_contain("py:list:copy", ["x", "y"]), [True, True])
        self.client.delete("py:list:a")
        with self.assertRaises(grpc.RpcError) as gone:
            self.client.stats("py:list:a")
        self.assertEqual(gone.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_reserve_like_and_merge(self):
        self.client.reserve("py:all", capacity=1000, error_rate=0.01)
        self.assertTrue(self.client.reserve_like("py:shard-1", "py:all"))
        self.assertTrue(self.client.reserve_like("py:shard-2", "py:all"))
        self.assertFalse(self.client.reserve_like("py:shard-2", "py:all"))
        self.client.add("py:shard-1", ["a", "b"])
        self.client.add("py:shard-2", ["c"])
        stats = self.client.merge("py:all", ["py:shard-1", "py:shard-2"])
        self.assertEqual(stats.items_added, 3)
        self.assertEqual(self.client.might_contain("py:all", ["a", "b", "c"]), [True] * 3)
        # A dump ORed into the existing filter of its name (as from another server).
        self.client.reserve_like("py:shard-3", "py:all")
        self.client.add("py:shard-3", ["d"])
        dump = self.client.export("py:shard-3")
        merged = self.client.import_dump("py:all", dump, merge_into_existing=True)
        self.assertEqual(merged.items_added, 4)
        self.assertEqual(self.client.might_contain("py:all", ["d"]), [True])
        self.client.reserve("py:stranger", capacity=1000, error_rate=0.01)
        with self.assertRaises(grpc.RpcError) as refused:
            self.client.merge("py:all", ["py:stranger"])
        self.assertEqual(refused.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("another seed", refused.exception.details())

    def test_cuckoo_remove_and_count(self):
        self.assertTrue(self.client.reserve("py:blocked", capacity=1000, error_rate=0.01,
                                            kind="cuckoo"))
        self.assertEqual(self.client.add("py:blocked", ["a", "b", "b", 7]), [True] * 4)
        self.assertEqual(self.client.count("py:blocked", ["a", "b", "7", "z"]), [1, 2, 1, 0])
        self.assertEqual(self.client.remove("py:blocked", ["a", "z"]), [True, False])
        self.assertEqual(self.client.might_contain("py:blocked", ["a", "b"]), [False, True])
        stats = self.client.stats("py:blocked")
        self.assertEqual(stats.spec.kind, bloom_pb2.FILTER_KIND_CUCKOO)
        self.assertEqual(stats.items_added, 3)
        self.assertEqual(stats.sub_filter_stats[0].fingerprint_bits, 11)
        self.client.add("py:feed", ["x"], create_if_missing={"capacity": 100, "error_rate": 0.01,
                                                             "kind": "cuckoo"})
        self.assertEqual(self.client.count("py:feed", ["x"]), [1])
        self.client.reserve("py:plain", capacity=1000, error_rate=0.01)
        with self.assertRaises(grpc.RpcError) as refused:
            self.client.remove("py:plain", ["a"])
        self.assertEqual(refused.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        with self.assertRaises(ValueError):
            self.client.reserve("py:bad", capacity=10, error_rate=0.1, kind="quotient")

    def test_example_runs(self):
        example.main(self.server.target)
        self.assertEqual(self.client.might_contain("example:user-ids", [1500]), [True])


def _metric(port, series):
    """The value of one Prometheus series scraped from the server's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(series + " "):
                return float(line.split()[-1])
    return 0.0


class PipelinedClientTest(LoggedTestCase):
    """pipelined=True: many threads' single-key calls coalesce over a Pipeline stream."""

    @classmethod
    def setUpClass(cls):
        cls.server = ServerFixture(["--metrics_listen=127.0.0.1:0"])
        cls.client = BloomClient(cls.server.target, pipelined=True)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        assert cls.server.stop() == 0

    def test_absent_if_missing_coalesces_apart_from_plain_checks(self):
        # Threads check a filter that does not exist yet, half of them with absent_if_missing:
        # merged operations must keep the two kinds apart.
        answers, errors = [], []

        def check(t):
            try:
                answers.append(self.client.might_contain(
                    "pp:per-user", [f"item-{t}"], absent_if_missing=(t % 2 == 0)))
            except grpc.RpcError as error:
                errors.append(error.code())

        _run_threads(check, 20)
        self.assertEqual(answers, [[False]] * 10)
        self.assertEqual(errors, [grpc.StatusCode.NOT_FOUND] * 10)

    def test_threads_coalesce_and_each_gets_its_answer(self):
        self.client.reserve("pp:users", capacity=100000, error_rate=0.01)
        threads, calls, failures = 20, 100, []

        def work(t):
            for i in range(calls):
                item = f"t{t}-{i}"
                try:
                    added = self.client.add("pp:users", [item])
                    present = self.client.might_contain("pp:users", [item, f"never-{t}-{i}"])
                except grpc.RpcError as error:
                    failures.append(repr(error))
                    continue
                if len(added) != 1 or len(present) != 2 or not present[0]:
                    failures.append(f"{item}: added={added} present={present}")

        _run_threads(work, threads)
        self.assertEqual(failures, [])
        items = [f"t{t}-{i}" for t in range(threads) for i in range(calls)]
        with BloomClient(self.server.target) as plain:
            self.assertTrue(all(plain.might_contain("pp:users", items)))
        operations = _metric(self.server.metrics_port,
                             'bloom_rpc_requests_total{code="OK",method="Pipeline.Add"}')
        self.assertGreater(operations, 0)
        self.assertLess(operations, threads * calls)  # coalesced: fewer operations than calls

    def test_calls_on_many_filters_pack_into_few_messages(self):
        """One filter per user: calls that wait together go out in one message (`more`)."""
        spec = {"capacity": 1000, "error_rate": 0.01}
        threads, calls, failures = 16, 40, []

        def work(t):
            for i in range(calls):
                name, item = f"pp:user-{t}-{i % 7}", f"seen-{i}"
                try:
                    if len(self.client.add(name, [item], create_if_missing=spec)) != 1 or \
                            self.client.might_contain(name, [item]) != [True]:
                        failures.append(f"{name}/{item}")
                except grpc.RpcError as error:
                    failures.append(repr(error))

        _run_threads(work, threads)
        self.assertEqual(failures, [])
        self.assertTrue(all(lane.packs for lane in self.client._coalescer._lanes))
        with BloomClient(self.server.target) as plain:
            for t in range(threads):
                for i in range(calls):
                    self.assertEqual(plain.might_contain(f"pp:user-{t}-{i % 7}", [f"seen-{i}"]),
                                     [True])

    def test_errors_keep_their_codes(self):
        with self.assertRaises(grpc.RpcError) as missing:
            self.client.might_contain("pp:missing", ["x"])
        self.assertEqual(missing.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertIn("pp:missing", missing.exception.details())
        self.client.reserve("pp:errors", capacity=100, error_rate=0.01)
        with self.assertRaises(grpc.RpcError) as too_big:
            self.client.add("pp:errors", [b"x" * 70000])  # over the default 64 KiB per item
        self.assertEqual(too_big.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(self.client.add("pp:errors", ["fine"]), [True])
        self.assertEqual(self.client.add("pp:made", ["a"],
                                         create_if_missing={"capacity": 50, "error_rate": 0.01}),
                         [True])
        self.assertEqual(self.client.stats("pp:made").spec.capacity, 50)

    def test_threads_removing_coalesce_and_remove_each_copy_once(self):
        # error_rate 1e-6: removing an item no longer held finds no other item's fingerprint.
        self.client.reserve("pp:cuckoo", capacity=100000, error_rate=1e-6, kind="cuckoo")
        threads, calls, shared = 10, 50, 100
        own = [f"t{t}-{i}" for t in range(threads) for i in range(calls)]
        with BloomClient(self.server.target) as plain:
            plain.add("pp:cuckoo", own + [f"shared-{k}" for k in range(shared)])
        failures, removed_shared, lock = [], [0] * shared, threading.Lock()

        def work(t):
            for i in range(calls):
                try:
                    if self.client.remove("pp:cuckoo", [f"t{t}-{i}"]) != [True]:
                        failures.append(f"t{t}-{i} not removed")
                    # Threads t and t + 1 race for each shared item k with k % threads == t.
                    for owner in (t, (t + threads - 1) % threads):
                        item = owner + i * threads
                        if item < shared and self.client.remove(
                                "pp:cuckoo", [f"shared-{item}"]) == [True]:
                            with lock:
                                removed_shared[item] += 1
                except grpc.RpcError as error:
                    failures.append(repr(error))

        _run_threads(work, threads)
        self.assertEqual(failures, [])
        self.assertEqual(removed_shared, [1] * shared)
        with BloomClient(self.server.target) as plain:
            self.assertFalse(any(plain.might_contain("pp:cuckoo", own)))
        operations = _metric(self.server.metrics_port,
                             'bloom_rpc_requests_total{code="OK",method="Pipeline.Remove"}')
        self.assertGreater(operations, 0)
        self.assertLess(operations, threads * calls + 2 * shared)  # fewer operations than calls

    def test_threads_counting_get_their_own_counts_over_the_stream(self):
        # Calls made before the stream's headers said it takes counts go unary; then on it.
        self.client.reserve("pp:counted", capacity=100000, error_rate=1e-6, kind="cuckoo")
        threads, calls, failures = 10, 30, []

        def work(t):
            for i in range(calls):
                item = f"t{t}-{i}"
                try:
                    for _ in range(i % 3):  # item i is held i % 3 copies
                        self.client.add("pp:counted", [item])
                    counts = self.client.count("pp:counted", [item, f"absent-{t}-{i}"])
                    if counts != [i % 3, 0]:
                        failures.append(f"{item}: {counts}")
                except grpc.RpcError as error:
                    failures.append(repr(error))

        _run_threads(work, threads)
        self.assertEqual(failures, [])
        with self.assertRaises(grpc.RpcError) as missing:
            self.client.count("pp:missing", ["x"])
        self.assertEqual(missing.exception.code(), grpc.StatusCode.NOT_FOUND)

        def served(method):
            return _metric(self.server.metrics_port,
                           f'bloom_rpc_requests_total{{code="OK",method="{method}"}}')
        pipelined, unary = served("Pipeline.Count"), served("Count")
        self.assertGreater(pipelined, 0)
        self.assertLessEqual(unary, threads)
        self.assertEqual(self.client.count("pp:counted", ["t0-1"]), [1])
        self.assertEqual(served("Pipeline.Count"), pipelined + 1)
        self.assertEqual(served("Count"), unary)


def make_tls_files(directory):
    """A CA and a server certificate for 127.0.0.1, made with openssl; returns their paths."""
    def run(*args):
        subprocess.run(args, cwd=directory, check=True, capture_output=True)
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=py-test-ca")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    with open(os.path.join(directory, "ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-out", "server.crt", "-extfile", "ext")
    return [os.path.join(directory, name) for name in ("ca.crt", "server.crt", "server.key")]


class ReconnectTest(LoggedTestCase):
    """A client, unary or pipelined, is back as soon as a server restarted on the same address
    serves, although calls failed while it was down and gRPC's backup poller is off (above):
    bloom_reconnect.py."""

    @staticmethod
    def _hold_port(port):
        """Keeps `port` from every other process while the server is down: bound, not
        listening, so a connection to it is refused (as to no server at all), and another
        test's server cannot get it from the kernel and answer this client's calls."""
        holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", int(port)))
        return holder

    def _restart_and_wait(self, pipelined):
        server = ServerFixture()
        client = BloomClient(server.target, timeout=5, pipelined=pipelined)
        try:
            self.assertEqual(client.might_contain("f", ["x"], absent_if_missing=True), [False])
            for restart in range(2):
                port = server.target.rsplit(":", 1)[1]
                server.kill()
                holder = self._hold_port(port)
                for _ in range(3):  # fail at once, and leave the channel reconnecting
                    started = time.monotonic()
                    with self.assertRaises(grpc.RpcError) as raised:
                        client.might_contain("f", ["x"], absent_if_missing=True)
                    self.assertEqual(raised.exception.code(), grpc.StatusCode.UNAVAILABLE)
                    self.assertLess(time.monotonic() - started, 5)
                    time.sleep(0.3)
                holder.close()
                server = ServerFixture([f"--listen=127.0.0.1:{port}"])
                self.assertEqual(server.target, f"127.0.0.1:{port}")
                deadline = time.monotonic() + 20  # well under it with the poller; never without
                while True:
                    try:
                        answer = client.might_contain("f", ["x"], absent_if_missing=True)
                        break
                    except grpc.RpcError as error:
                        if time.monotonic() > deadline:
                            self.fail(f"not back after restart {restart}: {error.code()}")
                        time.sleep(0.1)
                self.assertEqual(answer, [False])
        finally:
            client.close()
            server.stop()

    def test_a_unary_client_reconnects(self):
        self._restart_and_wait(pipelined=False)

    def test_a_pipelined_client_reconnects(self):
        self._restart_and_wait(pipelined=True)


class BalancingTest(LoggedTestCase):
    """A target naming several servers ("ipv4:a,b", as a headless Service's DNS name resolves)
    spreads the calls over them, and one killed under the client is skipped at once."""

    def test_calls_are_spread_and_a_killed_server_is_skipped(self):
        servers = [ServerFixture(), ServerFixture()]  # independent: each holds its own "f"
        try:
            for server in servers:
                with BloomClient(server.target) as direct:
                    direct.reserve("f", capacity=1000, error_rate=0.01)
                    direct.add("f", ["x"])
            with BloomClient("ipv4:" + ",".join(s.target for s in servers), timeout=5) as client:
                for _ in range(20):
                    self.assertEqual(client.might_contain("f", ["x", "y"]), [True, False])
                for server in servers:
                    with BloomClient(server.target) as direct:
                        self.assertGreater(direct.stats("f").checks, 0, server.target)
                servers[0].kill()
                # At once: a read that meets the killed pod's connection is retried on the other.
                for i in range(20):
                    self.assertEqual(client.might_contain("f", ["x"]), [True], f"call {i}")
        finally:
            for server in servers:
                if server.stopped_at is None:
                    server.stop()


class SecureServerTest(LoggedTestCase):
    """TLS plus a token file: the client's tls and token arguments."""

    def test_tls_and_token(self):
        with tempfile.TemporaryDirectory(prefix="bloom-py-tls-") as secrets:
            ca, cert, key = make_tls_files(secrets)
            tokens = os.path.join(secrets, "tokens")
            with open(tokens, "w") as f:
                f.write(hashlib.sha256(b"py-writer").hexdigest() + " write\n")
            server = ServerFixture([f"--tls_cert_file={cert}", f"--tls_key_file={key}",
                                    f"--auth_token_file={tokens}"])
            try:
                with open(ca, "rb") as f:
                    roots = f.read()
                with BloomClient(server.target, tls=True, root_certificates=roots,
                                 token="py-writer") as client:
                    self.assertTrue(client.reserve("secure", capacity=100, error_rate=0.01))
                    self.assertEqual(client.add("secure", ["a"]), [True])
                    self.assertEqual(client.might_contain("secure", ["a", "b"]), [True, False])
                with BloomClient(server.target, tls=True, root_certificates=roots,
                                 token="py-writer", pipelined=True) as pipelined:
                    self.assertEqual(pipelined.add("secure", ["c"]), [True])
                    self.assertEqual(pipelined.might_contain("secure", ["c", "d"]), [True, False])
                with BloomClient(server.target, tls=True, root_certificates=roots,
                                 pipelined=True) as anonymous:
                    with self.assertRaises(grpc.RpcError) as refused:
                        anonymous.might_contain("secure", ["c"])
                    self.assertEqual(refused.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
                with BloomClient(server.target, tls=True, root_certificates=roots) as anonymous:
                    with self.assertRaises(grpc.RpcError) as caught:
                        anonymous.stats("secure")
                    self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            finally:
                self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main()
