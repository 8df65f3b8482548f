"""A small Python client for bloom-server.

    from bloom_client import BloomClient

    client = BloomClient("127.0.0.1:50051")
    client.reserve("users", capacity=1_000_000, error_rate=0.01)  # safe from every replica
    client.add("users", ["alice", "bob"])            # -> [True, True]
    client.might_contain("users", ["alice", 1001])   # -> [True, False]
    # Recent membership: forget items after a week; delete the filter after 30 idle days.
    client.reserve("feed:42", capacity=10_000, error_rate=0.01,
                   window=timedelta(days=7), idle_ttl=timedelta(days=30))

Items may be str (UTF-8), bytes, or int (sent as its decimal string, like the C++ client), and
they are all sent as bytes: the text "a" and the bytes b"a" are the same item. Lists longer than
`batch_size` are sent as several requests, in order (each request is atomic, the list is not).
Errors are grpc.RpcError with the server's status code, e.g. grpc.StatusCode.NOT_FOUND.

Needs grpcio and protobuf (Debian's python3-grpcio and python3-protobuf, or later). The wheel
(`python3 -m build --no-isolation --wheel` in client/python) carries the stubs generated from
protos/bloom/v1/bloom.proto; in this tree the build puts them in build/protos/python instead:
add that directory to PYTHONPATH.

Security: `token` is sent as "authorization: Bearer <token>" with every call (servers started
with --auth_token_file); `tls=True` connects with TLS, verified against `root_certificates`
(PEM bytes; None = the system's roots), with `private_key` and `certificate_chain` (PEM bytes)
as the client certificate for servers that require mutual TLS.

Pipelined mode: with `pipelined=True`, add(), might_contain(), remove() and count() calls of up to
batch_size items travel over bloom.v1.Pipeline streams (count() once the stream's server has said it
takes counts; before, and with older servers, it is a unary call), and concurrent calls of one kind
on the same filter from many threads are coalesced into one operation (bloom_pipeline.py): the
server then pays per batch, not per call. Errors keep their codes (bloom_pipeline.PipelineError is a
grpc.RpcError); a broken stream fails its unanswered calls with UNAVAILABLE (retry an add, which is
idempotent; a remove may have been made).

Replicas: any pod of a replicated deployment serves any call (followers forward writes to the
primary). Writes answer with a sequence; the client keeps the highest (last_sequence) and sends
it with every read, so a follower answers a read only once it has applied this client's writes.
observe_sequence() passes a sequence on from another client.

Sharded deployments (bloom-server --shard_map): any pod answers any call, forwarding calls for
another group's filters there. With `shard_routing=True` the client fetches the shard map and sends
each call (and each group's pipelined calls, on streams of their own) straight to the primary of
the group that owns the filter, and fetches the map again when an answer says it changed
(bloom_shards.py). shard_map() returns the map a server holds.

Restarts: a server that is unreachable fails calls with UNAVAILABLE at once; after such a
failure the client polls its reconnection (bloom_reconnect.py), so it is back as soon as the
server is.

Thread-safety: a BloomClient may be shared by threads (gRPC channels and stubs are).
"""

import functools
import inspect
import json
from datetime import timedelta

import grpc
from google.protobuf import duration_pb2

from bloom.v1 import bloom_pb2
from bloom.v1 import bloom_pb2_grpc
from bloom_pipeline import ADD, CHECK, COUNT, NOT_SENT, REMOVE, Coalescer, PipelineError, Sequence
from bloom_reconnect import ReconnectPoller
from bloom_shards import ShardRoutes

__all__ = ["BloomClient", "PipelineError"]

_DUMP_CHUNK = 1 << 20

# round_robin: a target naming several pods (see BloomClient) gets a connection to each and
# spreads the calls over those that answer; a pod that goes away is out of the rotation once its
# connection is seen closed. One address behaves as gRPC's default (pick_first).
# Reads are retried (on the next pod) when they fail UNAVAILABLE: gRPC's C core reads a
# connection's end only while a call polls, so the first call sent to a pod that went away while
# the client was idle fails. Writes are not: an add whose answer was lost may have been made
# (the caller retries it, knowing that), and a remove must not be made twice.
_SERVICE_CONFIG = json.dumps({
    "loadBalancingConfig": [{"round_robin": {}}],
    "methodConfig": [{
        "name": [{"service": "bloom.v1.BloomFilterService", "method": method}
                 for method in ("MightContain", "Count", "Stats", "List")],
        "retryPolicy": {
            "maxAttempts": 3,
            "initialBackoff": "0.01s",
            "maxBackoff": "0.1s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE"],
        },
    }],
})


def _as_bytes(item):
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    if isinstance(item, bool):  # bool is an int subclass; refuse rather than send "True"
        raise TypeError("items must be str, bytes or int, not bool")
    if isinstance(item, int):
        return str(item).encode("ascii")
    raise TypeError(f"items must be str, bytes or int, not {type(item).__name__}")


def _duration(value):
    """A Duration from a datetime.timedelta or a number of seconds (None: unset)."""
    if value is None:
        return None
    if not isinstance(value, timedelta):
        value = timedelta(seconds=value)
    out = duration_pb2.Duration()
    out.FromTimedelta(value)
    return out


_KINDS = {"bloom": bloom_pb2.FILTER_KIND_BLOOM, "cuckoo": bloom_pb2.FILTER_KIND_CUCKOO}


def _polls_reconnection(method):
    """A BloomClient call whose UNAVAILABLE error wakes the client's ReconnectPoller, so the
    client is back as soon as the server is (bloom_reconnect.py)."""
    if inspect.isgeneratorfunction(method):
        @functools.wraps(method)
        def generator(self, *args, **kwargs):
            try:
                yield from method(self, *args, **kwargs)
            except grpc.RpcError as error:
                self._reconnect.on_error(error)
                raise
        return generator

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except grpc.RpcError as error:
            self._reconnect.on_error(error)
            raise
    return call


def _spec(capacity, error_rate, expansion=0, non_scaling=False, window=None, window_slices=0,
          idle_ttl=None, kind="bloom"):
    if kind not in _KINDS:
        raise ValueError(f"kind must be 'bloom' or 'cuckoo', not {kind!r}")
    return bloom_pb2.FilterSpec(capacity=capacity, error_rate=error_rate,
                                expansion=expansion, non_scaling=non_scaling,
                                window=_duration(window), window_slices=window_slices,
                                idle_ttl=_duration(idle_ttl),
                                kind=_KINDS[kind] if kind == "cuckoo" else 0)


class BloomClient:
    """Client of a bloom-server (plaintext or TLS gRPC).

    target: "host:port", or several pods of a replicated deployment: "dns:///name:port" (every
    address the name has, e.g. a headless Service's) or "ipv4:10.0.0.1:50051,10.0.0.2:50051".
    Calls are then spread over the pods that answer, and a pod that goes away is skipped at once.
    """

    def __init__(self, target="127.0.0.1:50051", timeout=10.0, batch_size=10_000, channel=None,
                 token=None, tls=False, root_certificates=None, private_key=None,
                 certificate_chain=None, pipelined=False, pipeline_streams=1,
                 shard_routing=False):
        # A pod restarting, or rebuilding its server in a new role when the primary fails
        # over, is back within a second or so: reconnect every few hundred milliseconds
        # rather than after gRPC's default backoff (1 s, growing to 2 min).
        options = [("grpc.max_receive_message_length", -1),
                   ("grpc.max_send_message_length", -1),
                   ("grpc.initial_reconnect_backoff_ms", 200),
                   ("grpc.min_reconnect_backoff_ms", 200),
                   ("grpc.max_reconnect_backoff_ms", 5000),
                   ("grpc.service_config", _SERVICE_CONFIG)]
        if tls or root_certificates or certificate_chain:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=root_certificates, private_key=private_key,
                certificate_chain=certificate_chain)
            connect = lambda address: grpc.secure_channel(address, credentials, options=options)
        else:
            connect = lambda address: grpc.insecure_channel(address, options=options)
        self._channel = channel or connect(target)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self._stub = bloom_pb2_grpc.BloomFilterServiceStub(self._channel)
        self._reconnect = ReconnectPoller(self._channel)
        self._timeout = timeout
        self._batch_size = max(1, batch_size)
        self._sequence = Sequence()
        self._coalescer = Coalescer(self._stub, self._metadata, self._batch_size, timeout,
                                    pipeline_streams, self._sequence) if pipelined else None
        self._routes = None
        if shard_routing:
            # Each group's pipelined calls on streams of their own, with the group's own
            # sequences (sequences are each group's).
            make_coalescer = (lambda stub: Coalescer(stub, self._metadata, self._batch_size,
                                                     timeout, pipeline_streams, Sequence())
                              ) if pipelined else None
            self._routes = ShardRoutes(self._stub, connect, self._metadata, timeout,
                                       make_coalescer)
            try:
                self._routes.refresh()
            except grpc.RpcError:
                pass  # the pod is not up yet: it forwards, and its first answer fetches the map

    @property
    def shard_map_version(self):
        """With shard_routing, the version of the shard map this client routes by (0: none, or
        the deployment is not sharded)."""
        return self._routes.version if self._routes is not None else 0

    @_polls_reconnection
    def shard_map(self):
        """The bloom.v1.ShardMap the server holds (version 0: it is not sharded)."""
        return self._stub.GetShardMap(bloom_pb2.GetShardMapRequest(), timeout=self._timeout,
                                      metadata=self._metadata).map

    @property
    def last_sequence(self):
        """The highest sequence a write through this client was given. Reads send it as
        min_sequence, so a follower answers them only once it has applied those writes."""
        return self._sequence.value

    def observe_sequence(self, sequence):
        """Raises last_sequence to one learned elsewhere (another client that wrote)."""
        self._sequence.observe(sequence)

    def close(self):
        if self._routes is not None:
            self._routes.close()
        if self._coalescer is not None:
            self._coalescer.close()
        self._reconnect.close()
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @_polls_reconnection
    def reserve(self, name, capacity, error_rate, expansion=0, non_scaling=False, window=None,
                window_slices=0, idle_ttl=None, kind="bloom"):
        """Creates a filter; returns True if created, False if it existed with the same spec.

        window: forget items older than this (a timedelta or seconds), kept in window_slices
        slices (0: the server's default, 8); idle_ttl: delete the filter after this long
        without an add or check. kind="cuckoo": a cuckoo filter, which can remove() and
        count() items (and has no window).
        """
        spec = _spec(capacity, error_rate, expansion, non_scaling, window, window_slices,
                     idle_ttl, kind)
        response = self._unary("Reserve", name, bloom_pb2.ReserveRequest(name=name, spec=spec))
        self._sequence.observe(response.sequence)
        return response.created

    @_polls_reconnection
    def reserve_like(self, name, like):
        """Creates an empty filter with the spec and hash seed of filter `like`, so that the two
        can be merged; returns True if created, False if it existed already like it."""
        response = self._unary("Reserve", name, bloom_pb2.ReserveRequest(name=name, like=like))
        self._sequence.observe(response.sequence)
        return response.created

    @_polls_reconnection
    def merge(self, target, sources):
        """ORs the filters `sources` (made alike: reserve_like) into `target`; returns the
        target's FilterStats."""
        response = self._unary("Merge", target,
                               bloom_pb2.MergeRequest(target=target, sources=list(sources)))
        self._sequence.observe(response.sequence)
        return response.stats

    @_polls_reconnection
    def add(self, name, items, create_if_missing=None):
        """Adds items; returns for each whether it was (probably) new.

        create_if_missing: a dict like {"capacity": 1000, "error_rate": 0.01} (and any of
        reserve's other arguments, e.g. "window": timedelta(days=7)) to create a missing
        filter instead of failing with NOT_FOUND.
        """
        spec = _spec(**create_if_missing) if create_if_missing else None
        if self._coalesces(items):
            return self._coalescer_for(name).call(ADD, name, [_as_bytes(i) for i in items], spec)
        def add_batch(batch):
            response = self._unary("Add", name, bloom_pb2.AddRequest(
                name=name, raw_items=batch, create_if_missing=spec))
            self._sequence.observe(response.sequence)
            return response.added
        return self._batched(items, add_batch)

    @_polls_reconnection
    def might_contain(self, name, items, absent_if_missing=False):
        """For each item: False means it was never added, True that it probably was.

        absent_if_missing: a filter that does not exist answers all False instead of raising
        NOT_FOUND (nothing is created): one call for "has this user seen this item?"."""
        if self._coalesces(items):
            return self._coalescer_for(name).call(CHECK, name, [_as_bytes(i) for i in items],
                                                  absent_if_missing=absent_if_missing)
        return self._batched(items, lambda batch: self._unary(
            "MightContain", name,
            bloom_pb2.MightContainRequest(name=name, raw_items=batch,
                                          absent_if_missing=absent_if_missing,
                                          min_sequence=self._sequence.value)).present)

    @_polls_reconnection
    def remove(self, name, items):
        """Cuckoo filters: removes one copy of each item; returns for each whether the filter
        held one. Remove only what was added: removing another item can remove a colliding
        item's copy, which then reads absent. Not idempotent: a retried call removes again."""
        if self._coalesces(items):
            return self._coalescer_for(name).call(REMOVE, name, [_as_bytes(i) for i in items])

        def remove_batch(batch):
            response = self._unary("Remove", name,
                                   bloom_pb2.RemoveRequest(name=name, raw_items=batch))
            self._sequence.observe(response.sequence)
            return response.removed
        return self._batched(items, remove_batch)

    @_polls_reconnection
    def count(self, name, items):
        """Cuckoo filters: the copies of each item the filter holds."""
        if self._coalesces(items):
            counts = self._coalescer_for(name).call(COUNT, name, [_as_bytes(i) for i in items])
            if counts is not NOT_SENT:
                return counts
            # This stream's server has not said it takes counts yet: unary.
        return self._batched(items, lambda batch: self._unary(
            "Count", name,
            bloom_pb2.CountRequest(name=name, raw_items=batch,
                                   min_sequence=self._sequence.value)).counts)

    @_polls_reconnection
    def stats(self, name):
        """The filter's bloom.v1.FilterStats."""
        return self._unary("Stats", name, bloom_pb2.StatsRequest(
            name=name, min_sequence=self._sequence.value)).stats

    @_polls_reconnection
    def delete(self, name):
        response = self._unary("Delete", name, bloom_pb2.DeleteRequest(name=name))
        self._sequence.observe(response.sequence)

    @_polls_reconnection
    def list(self, prefix=""):
        """Yields the FilterStats of every filter whose name starts with prefix, in name order."""
        token = ""
        while True:
            page = self._stub.List(bloom_pb2.ListRequest(prefix=prefix, page_token=token,
                                                         min_sequence=self._sequence.value),
                                   timeout=self._timeout, metadata=self._metadata)
            yield from page.filters
            token = page.next_page_token
            if not token:
                return

    @_polls_reconnection
    def export(self, name):
        """The filter's dump, as bytes."""
        return b"".join(chunk.data for chunk in
                        self._stream_stub(name).Export(bloom_pb2.ExportRequest(
                            name=name, min_sequence=self._sequence.value),
                                          metadata=self._metadata))

    @_polls_reconnection
    def import_dump(self, name, dump, merge_into_existing=False):
        """Creates filter `name` from a dump made by export(); returns its FilterStats.

        merge_into_existing: if filter `name` exists (made alike the dump's), OR the dump into
        it instead of failing with ALREADY_EXISTS.
        """
        def chunks():
            yield bloom_pb2.ImportChunk(name=name, data=dump[:_DUMP_CHUNK],
                                        merge_into_existing=merge_into_existing)
            for offset in range(_DUMP_CHUNK, len(dump), _DUMP_CHUNK):
                yield bloom_pb2.ImportChunk(data=dump[offset:offset + _DUMP_CHUNK])
        response = self._stream_stub(name).Import(chunks(), metadata=self._metadata)
        self._sequence.observe(response.sequence)
        return response.stats

    def _coalesces(self, items):
        return self._coalescer is not None and 0 < len(items) <= self._batch_size

    def _stream_stub(self, name):
        group = self._group(name)
        return group.stub if group is not None else self._stub

    def _group(self, name):
        return self._routes.for_name(name) if self._routes is not None else None

    def _coalescer_for(self, name):
        group = self._group(name)
        return group.coalescer if group is not None and group.coalescer else self._coalescer

    def _unary(self, method, name, request):
        """A unary call on filter `name`: to its group's primary with shard routing (and the map
        fetched again if the answer says it changed), else to the target."""
        group = self._group(name)
        stub = group.stub if group is not None else self._stub
        if self._routes is None:
            return getattr(stub, method)(request, timeout=self._timeout, metadata=self._metadata)
        try:
            response, call = getattr(stub, method).with_call(request, timeout=self._timeout,
                                                             metadata=self._metadata)
        except grpc.RpcError as error:
            self._routes.after_error(error)
            raise
        self._routes.after_call(call)
        return response

    def _batched(self, items, call):
        raw = [_as_bytes(item) for item in items]
        if not raw:
            return list(call([]))  # the server answers INVALID_ARGUMENT
        results = []
        for start in range(0, len(raw), self._batch_size):
            results.extend(call(raw[start:start + self._batch_size]))
        return results
