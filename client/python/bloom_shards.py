"""A client's copy of a sharded deployment's map, to send each call for a filter straight to the
primary of the group that owns it (BloomClient(shard_routing=True)); the C++ client's
client/shard_routes.h does the same.

    slot_of("feed:{user42}:seen", 4096)   # the server's common/slot.h, byte for byte

A filter's slot is CRC-32 (zlib's) of its name's UTF-8 bytes modulo the slot count; a name holding
a hash tag (a "{" and, after it, a "}" with at least one byte between) hashes only the tag.

The copy is fetched from the seed (the client's own target) at start, and again when an answer
says it is stale: a forwarded answer's `bloom-shard-map-version` header names a later version (one
fetch per version), or an error says a filter belongs to another group (at most one fetch each
100 ms). An unsharded server (map version 0), or one that predates sharding (UNIMPLEMENTED),
routes everything to the seed.

Thread-safety: a ShardRoutes may be shared by threads.
"""

import threading
import time
import zlib

import grpc

from bloom.v1 import bloom_pb2
from bloom.v1 import bloom_pb2_grpc

__all__ = ["ShardRoutes", "hashed_part", "slot_of"]

_REFRESH_INTERVAL = 0.1  # seconds between fetches that errors ask for


def hashed_part(name):
    """The bytes of `name` (str or bytes) that its slot hashes: its hash tag, or all of it."""
    raw = name.encode() if isinstance(name, str) else bytes(name)
    start = raw.find(b"{")
    if start < 0:
        return raw
    end = raw.find(b"}", start + 1)
    if end < 0 or end == start + 1:
        return raw
    return raw[start + 1:end]


def slot_of(name, slot_count):
    """The slot of filter `name` among `slot_count` (0 counts as 1)."""
    return zlib.crc32(hashed_part(name)) % max(1, slot_count)


class _Group:
    """One group's primary, and what calls to it use."""

    def __init__(self, address, channel, make_coalescer):
        self.address = address
        self.channel = channel
        self.stub = bloom_pb2_grpc.BloomFilterServiceStub(channel)
        self.coalescer = make_coalescer(self.stub) if make_coalescer else None

    def close(self):
        if self.coalescer is not None:
            self.coalescer.close()
        self.channel.close()


class ShardRoutes:
    """The map a BloomClient routes by. `connect(address)` opens a channel as the client's own
    was opened; `make_coalescer(stub)` makes a group's coalescer (pipelined mode) or is None."""

    def __init__(self, seed_stub, connect, metadata, timeout, make_coalescer=None):
        self._seed = seed_stub
        self._connect = connect
        self._metadata = metadata
        self._timeout = timeout
        self._make_coalescer = make_coalescer
        self._refreshing = threading.Lock()  # one fetch at a time
        self._last_refresh = 0.0
        self._lock = threading.Lock()
        self._version = 0
        self._owners = []  # per slot: a _Group, or None (the seed)
        self._groups = {}  # by address

    @property
    def version(self):
        with self._lock:
            return self._version

    def refresh(self, at_least=0):
        """Fetches the map from the seed (only if this copy is older than `at_least`)."""
        with self._refreshing:
            if at_least and self.version >= at_least:
                return
            self._last_refresh = time.monotonic()
            try:
                response = self._seed.GetShardMap(bloom_pb2.GetShardMapRequest(),
                                                  timeout=self._timeout, metadata=self._metadata)
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.UNIMPLEMENTED:
                    return
                raise
            shard_map = response.map
            with self._lock:
                if shard_map.version <= self._version:
                    return  # never back
                groups = {}
                by_name = {}
                for group in shard_map.groups:
                    if not group.primary:
                        continue  # none now: its filters go through the seed
                    routed = groups.get(group.primary) or self._groups.get(group.primary)
                    if routed is None:
                        routed = _Group(group.primary, self._connect(group.primary),
                                        self._make_coalescer)
                    groups[group.primary] = routed
                    by_name[group.name] = routed
                owners = [None] * shard_map.slot_count
                for owned in shard_map.ranges:
                    for slot in range(owned.first, min(owned.last + 1, len(owners))):
                        owners[slot] = by_name.get(owned.group)
                self._version = shard_map.version
                self._owners = owners
                self._groups = groups

    def for_name(self, name):
        """The group whose primary serves filter `name`, or None for the seed."""
        with self._lock:
            if not self._owners:
                return None
            return self._owners[slot_of(name, len(self._owners))]

    def after_call(self, call):
        """After a unary call (its grpc.Call): fetches the map again if the answer says so."""
        for key, value in call.initial_metadata() or ():
            if key == "bloom-shard-map-version":
                if int(value) > self.version:
                    self._quietly(self.refresh, int(value))
                else:
                    self._refresh_if_due()
                return

    def after_error(self, error):
        """After a failed call: a pod's refusal of a filter another group owns fetches the map."""
        if (isinstance(error, grpc.RpcError) and error.code() == grpc.StatusCode.UNAVAILABLE
                and "belongs to group" in (error.details() or "")):
            self._refresh_if_due()

    def close(self):
        with self._lock:
            groups, self._groups, self._owners = list(self._groups.values()), {}, []
        for group in groups:
            group.close()

    def _refresh_if_due(self):
        with self._refreshing:
            if time.monotonic() - self._last_refresh < _REFRESH_INTERVAL:
                return
        self._quietly(self.refresh)

    @staticmethod
    def _quietly(fetch, *args):
        try:
            fetch(*args)
        except grpc.RpcError:
            pass  # a failed fetch keeps the copy: the pods forward meanwhile
