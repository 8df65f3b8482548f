"""Tests of the Python client's shard routing (bloom_shards.py) against a real sharded deployment:
a real etcd and two bloom-server groups of one pod each, with the map written by etcdctl.

Run by ctest with BLOOM_SERVER_BIN and PYTHONPATH set; needs Debian's /usr/bin/python3, etcd and
etcdctl.
"""

import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import grpc

from bloom_client import BloomClient
from bloom_shards import hashed_part, slot_of
from test_bloom_client import LoggedTestCase, ServerFixture

SLOTS = 64
MAP_KEY = "py-shards/shardmap"
GROUPS = ("py-shards/a", "py-shards/b")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(done, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class SlotTest(unittest.TestCase):
    """The same values as the server's common/slot_test.cc: the function never changes."""

    def test_known_slots(self):
        self.assertEqual(slot_of("123456789", 4096), 2342)
        self.assertEqual(slot_of("user:1", 4096), 0x7BA5C282 % 4096)
        self.assertEqual(slot_of("", 4096), 0)
        self.assertEqual(slot_of(b"anything", 1), 0)

    def test_hash_tags(self):
        self.assertEqual(hashed_part("feed:{user42}:seen"), b"user42")
        self.assertEqual(hashed_part("x{}y"), b"x{}y")
        self.assertEqual(hashed_part("a{{b}c"), b"{b")
        self.assertEqual(slot_of("feed:{user42}:seen", 4096), slot_of("user42", 4096))


class ShardRoutingTest(LoggedTestCase):
    @classmethod
    def setUpClass(cls):
        cls.etcd_dir = tempfile.TemporaryDirectory(prefix="bloom-py-etcd-")
        client_port, peer_port = _free_port(), _free_port()
        cls.etcd_endpoint = f"127.0.0.1:{client_port}"
        cls.etcd = subprocess.Popen(
            ["etcd", f"--data-dir={cls.etcd_dir.name}/data",
             f"--listen-client-urls=http://{cls.etcd_endpoint}",
             f"--advertise-client-urls=http://{cls.etcd_endpoint}",
             f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
             f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
             f"--initial-cluster=default=http://127.0.0.1:{peer_port}", "--log-level=error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert _wait_for(lambda: cls._etcdctl("endpoint", "health").returncode == 0)
        owners = f"{GROUPS[0]}:0-{SLOTS // 2 - 1},{GROUPS[1]}:{SLOTS // 2}-{SLOTS - 1}"
        record = (f"format=1 version=1 slots={SLOTS} groups={','.join(GROUPS)} "
                  f"owners={owners}")
        assert cls._etcdctl("put", MAP_KEY, record).returncode == 0
        cls.pods = []
        for group in GROUPS:
            port = _free_port()
            cls.pods.append(ServerFixture(extra_args=(
                f"--listen=127.0.0.1:{port}", f"--advertise_address=127.0.0.1:{port}",
                f"--etcd_endpoints={cls.etcd_endpoint}", f"--cluster={group}",
                f"--shard_map={MAP_KEY}", "--leader_ttl=2s")))
        for pod in cls.pods:
            with BloomClient(pod.target) as client:
                assert _wait_for(lambda: ShardRoutingTest._knows_both_primaries(client))

    @staticmethod
    def _knows_both_primaries(client):
        try:
            shard_map = client.shard_map()
        except grpc.RpcError:
            return False
        return shard_map.version == 1 and all(g.primary for g in shard_map.groups)

    @classmethod
    def _etcdctl(cls, *args):
        return subprocess.run(["etcdctl", f"--endpoints={cls.etcd_endpoint}", *args],
                              env={**os.environ, "ETCDCTL_API": "3"}, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        for pod in cls.pods:
            pod.stop()
        cls.etcd.send_signal(signal.SIGKILL)
        cls.etcd.wait()
        cls.etcd_dir.cleanup()

    def _name_in(self, group_index, prefix):
        n = 0
        while slot_of(f"{prefix}{n}", SLOTS) // (SLOTS // 2) != group_index:
            n += 1
        return f"{prefix}{n}"

    def test_calls_go_straight_to_the_owning_groups_primary(self):
        for pipelined in (False, True):
            with BloomClient(self.pods[0].target, shard_routing=True, pipelined=pipelined,
                             timeout=5) as client:
                self.assertEqual(client.shard_map_version, 1)
                in_a = self._name_in(0, f"py-direct-{pipelined}-")
                in_b = self._name_in(1, f"py-direct-{pipelined}-")
                for name in (in_a, in_b):
                    client.reserve(name, capacity=1000, error_rate=0.01)
                # With the seed (group a's pod) stopped, group b's filters are still reached.
                self.pods[0].proc.send_signal(signal.SIGSTOP)
                try:
                    self.assertEqual(client.add(in_b, ["x", "y"]), [True, True])
                    self.assertEqual(client.might_contain(in_b, ["x", "z"]), [True, False])
                    self.assertEqual(client.stats(in_b).items_added, 2)
                finally:
                    self.pods[0].proc.send_signal(signal.SIGCONT)
                self.assertEqual(client.add(in_a, ["x"]), [True])
                self.assertEqual(client.might_contain(in_a, ["x"]), [True])

    def test_without_routing_any_pod_forwards_and_list_spans_both_groups(self):
        with BloomClient(self.pods[1].target) as client:
            names = [f"py-list:{i}" for i in range(12)]
            for name in names:
                client.reserve(name, capacity=1000, error_rate=0.01)
                client.add(name, ["item"])
            self.assertEqual(len({slot_of(n, SLOTS) // (SLOTS // 2) for n in names}), 2)
            self.assertEqual([s.name for s in client.list("py-list:")], sorted(names))
            self.assertTrue(all(client.might_contain(n, ["item"]) == [True] for n in names))


if __name__ == "__main__":
    unittest.main()
