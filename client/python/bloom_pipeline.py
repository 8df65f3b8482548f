"""The Python client's pipelined mode: concurrent small calls coalesced over Pipeline streams.

BloomClient(..., pipelined=True) sends add(), might_contain(), remove() and count() calls of up to
batch_size items over bloom.v1.Pipeline streams. Calls of one kind on the same filter from many
threads that wait together go out as one operation with all their items (removes in the order they
were made), with no timer: a call that finds its stream idle is sent at once; calls arriving while
an operation is in flight gather, and the answer to that operation sends them (as RocksDB's write
thread batches writers).

Operations that go out together travel in one message when the server says it reads
PipelineRequest.more (its bloom-pipeline-more header): calls on many filters (one per user)
then cost the server one message, and their adds one RocksDB write. Counts go on a stream only
once its server has said it takes them (bloom-pipeline-count; older servers end the stream on
one): until then Coalescer.call answers NOT_SENT and the client makes the unary call.

Each caller waits only for its own answer (at most the client's timeout: DEADLINE_EXCEEDED).
A merged operation failing with INVALID_ARGUMENT or RESOURCE_EXHAUSTED is retried one call at a
time, so each call gets the answer it would get alone. A broken stream fails its unanswered
calls with UNAVAILABLE (an add is idempotent: retry it; a remove is not, and may have been made),
or with the server's UNAUTHENTICATED / PERMISSION_DENIED when it refused the token; the next
call opens a new stream.

Errors are PipelineError, a grpc.RpcError with code() and details() like the unary calls'.

Thread-safety: a Coalescer may be used from many threads at once.
"""

import queue
import threading

import grpc

from bloom.v1 import bloom_pb2

# What a call does: Coalescer.call's `kind`.
ADD, CHECK, REMOVE, COUNT = "add", "check", "remove", "count"
# Coalescer.call's answer to a COUNT it did not send (see above).
NOT_SENT = object()

_CODES = {code.value[0]: code for code in grpc.StatusCode}
_RETRY_ALONE = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)
_REFUSED = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
_PACKED_BYTES = 1 << 20  # most bytes of operations packed into one message
_CLOSE_WAIT_SECONDS = 5  # close() waits this long at most for a cancelled stream's reader


class Sequence:
    """The highest sequence a write through this client was given (bloom.v1 `sequence`).

    Reads send it as min_sequence: a follower answers them only once it has applied every
    write this client made, or forwards them to the primary (read-your-writes)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.value = 0

    def observe(self, sequence):
        with self._lock:
            if sequence > self.value:
                self.value = sequence


class PipelineError(grpc.RpcError):
    """A failed pipelined call: code() and details() as a unary call's grpc.RpcError."""

    def __init__(self, code, details):
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details

    def code(self):
        return self._code

    def details(self):
        return self._details


class _Call:
    __slots__ = ("kind", "name", "create", "absent", "items", "alone", "done", "result", "error")

    def __init__(self, kind, name, create, items, absent=False):
        self.kind, self.name, self.create, self.items = kind, name, create, items
        self.absent = absent  # a check's absent_if_missing
        self.alone = False
        self.done = threading.Event()
        self.result = None
        self.error = None

    def key(self):
        create = self.create.SerializeToString() if self.create is not None else b""
        return (self.kind, self.name, create, self.absent)

    def answer(self, result=None, error=None):
        if not self.done.is_set():
            self.result, self.error = result, error
            self.done.set()


class _Lane:
    """One Pipeline stream and the calls waiting for it or answered on it."""

    def __init__(self, stub, metadata, max_items, sequence):
        self._stub = stub
        self._metadata = metadata
        self._max_items = max_items
        self._sequence = sequence
        self._lock = threading.Lock()
        self._waiting = []
        self._in_flight = {}  # operation id -> [item count, calls in item order]
        self._sending = False  # an operation is in flight; its answer sends what waits
        self._next_id = 1
        self._requests = None  # the open stream's request queue; None: no stream
        self._responses = None
        self._reader = None  # the thread reading the open (or last) stream's answers
        self.packs = False  # the open stream's server reads `more`: pack operations
        self.counts = False  # the open stream's server takes counts

    def submit(self, call):
        with self._lock:
            self._waiting.append(call)
            if self._sending:
                return
            self._sending = True
            if self._requests is None:
                self._open()
            requests, batch = self._requests, self._take_batch()
            self._sending = bool(self._in_flight)  # nothing sent: no answer comes to reset it
        for request in batch:
            requests.put(request)

    def close(self):
        with self._lock:
            requests, responses, reader = self._requests, self._responses, self._reader
            self._requests = None
        if requests is not None:
            requests.put(None)  # ends the request stream: the server finishes it
            responses.cancel()
        # The reader sees the cancellation at once. Waiting for it leaves no call in progress
        # when the program exits: gRPC Python can hang in its exit-time shutdown when a call
        # is still being read by another thread.
        if reader is not None and reader is not threading.current_thread():
            reader.join(_CLOSE_WAIT_SECONDS)

    def _open(self):
        requests = queue.SimpleQueue()
        self._requests = requests
        self.packs = self.counts = False
        self._responses = self._stub.Pipeline(iter(requests.get, None), metadata=self._metadata)
        self._reader = threading.Thread(target=self._read, args=(requests, self._responses),
                                        daemon=True, name="bloom-pipeline-reader")
        self._reader.start()

    def _take_batch(self):
        """Every waiting call as operations, one per run of calls that may share one."""
        batch, open_ops = [], {}
        for call in self._waiting:
            if call.kind == COUNT and not self.counts:
                call.answer(result=NOT_SENT)
                continue
            key = None if call.alone else call.key()
            request = open_ops.get(key) if key is not None else None
            if request is not None and \
                    self._in_flight[request.id][0] + len(call.items) > self._max_items:
                request = None
            if request is None:
                request = bloom_pb2.PipelineRequest(id=self._next_id)
                self._next_id += 1
                if call.kind == ADD:
                    request.add.name = call.name
                    if call.create is not None:
                        request.add.create_if_missing.CopyFrom(call.create)
                elif call.kind == REMOVE:
                    request.remove.name = call.name
                elif call.kind == COUNT:
                    request.count.name = call.name
                    request.count.min_sequence = self._sequence.value
                else:
                    request.might_contain.name = call.name
                    request.might_contain.absent_if_missing = call.absent
                    request.might_contain.min_sequence = self._sequence.value
                batch.append(request)
                self._in_flight[request.id] = [0, []]
                if key is not None:
                    open_ops[key] = request
            op = request.add if call.kind == ADD \
                else request.remove if call.kind == REMOVE \
                else request.count if call.kind == COUNT else request.might_contain
            op.raw_items.extend(call.items)
            entry = self._in_flight[request.id]
            entry[0] += len(call.items)
            entry[1].append(call)
        self._waiting = []
        return self._pack(batch) if self.packs else batch

    @staticmethod
    def _pack(batch):
        """The operations as few messages: the first of each carries the others in `more`."""
        messages, size = [], 0
        for request in batch:
            request_size = request.ByteSize()
            if messages and size + request_size <= _PACKED_BYTES:
                messages[-1].more.append(request)
                size += request_size + 4  # its tag and length
            else:
                messages.append(request)
                size = request_size
        return messages

    def _read(self, requests, responses):
        error = None
        try:
            # Sent when the stream opens (by servers that predate bloom-pipeline-count: with
            # the first answer).
            headers = dict(responses.initial_metadata())
            with self._lock:
                if self._requests is requests:
                    self.packs = headers.get("bloom-pipeline-more") == "1"
                    self.counts = headers.get("bloom-pipeline-count") == "1"
            for response in responses:
                self._answer(requests, response)
                for part in response.more:
                    self._answer(requests, part)
        except grpc.RpcError as e:
            error = e
        code = error.code() if error is not None else grpc.StatusCode.OK
        if code in _REFUSED:
            failure = PipelineError(code, error.details())
        else:
            details = error.details() if error is not None else "by the server"
            failure = PipelineError(
                grpc.StatusCode.UNAVAILABLE,
                f"the Pipeline stream ended: {details} ({code.name}); an add may be retried, "
                "a remove may have been made")
        with self._lock:
            if self._requests is requests:
                self._requests = None
            calls = [call for _, op_calls in self._in_flight.values() for call in op_calls]
            calls += self._waiting
            self._in_flight, self._waiting, self._sending = {}, [], False
        for call in calls:
            call.answer(error=failure)

    def _answer(self, requests, response):
        batch = []
        with self._lock:
            entry = self._in_flight.pop(response.id, None)
            if entry is None:
                return
            calls = entry[1]
            if response.HasField("error") and len(calls) > 1 and \
                    _CODES.get(response.error.code) in _RETRY_ALONE:
                for call in calls:
                    call.alone = True
                self._waiting.extend(calls)
                calls = []
            if not self._in_flight:
                batch = self._take_batch() if self._waiting else []
                self._sending = bool(self._in_flight)
        for request in batch:
            requests.put(request)
        if response.HasField("error"):
            failure = PipelineError(_CODES.get(response.error.code, grpc.StatusCode.UNKNOWN),
                                    response.error.message)
            for call in calls:
                call.answer(error=failure)
            return
        if response.HasField("add"):  # before the callers hear of their adds
            self._sequence.observe(response.add.sequence)
        elif response.HasField("remove"):
            self._sequence.observe(response.remove.sequence)
        answers = response.add.added if response.HasField("add") \
            else response.remove.removed if response.HasField("remove") \
            else response.count.counts if response.HasField("count") \
            else response.might_contain.present
        start = 0
        for call in calls:
            call.answer(result=list(answers[start:start + len(call.items)]))
            start += len(call.items)


class Coalescer:
    """Pipelined add/might_contain/remove/count over `streams` Pipeline streams (a call picks
    one by filter)."""

    def __init__(self, stub, metadata, max_items, timeout, streams=1, sequence=None):
        sequence = sequence if sequence is not None else Sequence()
        self._lanes = [_Lane(stub, metadata, max_items, sequence)
                       for _ in range(max(1, streams))]
        self._timeout = timeout

    def call(self, kind, name, items, create=None, absent_if_missing=False):
        """kind: ADD, CHECK, REMOVE or COUNT; items: a non-empty list of bytes; returns a list of
        bool (of int for COUNT, or NOT_SENT) or raises PipelineError."""
        call = _Call(kind, name, create, items, absent_if_missing)
        self._lanes[hash(name) % len(self._lanes)].submit(call)
        if not call.done.wait(self._timeout):
            raise PipelineError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                f"no answer within {self._timeout} s")
        if call.error is not None:
            raise call.error
        return call.result

    def close(self):
        for lane in self._lanes:
            lane.close()
