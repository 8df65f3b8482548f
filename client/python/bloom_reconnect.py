"""Drives a channel's reconnection while its calls fail fast (the C++ client's
client/reconnect_poller.h does the same).

grpcio uses gRPC's C core, which keeps a channel in TRANSIENT_FAILURE until a new connection is
READY and fails every call made meanwhile at once, without polling. The reconnection's socket
events (the connect, the server's SETTINGS frame) are read only by a thread that polls, and a
client has none between its calls but gRPC's backup poller, every 5 seconds by default
(grpc/grpc#28866): without this module, a server back in a second stays unreachable to this
client for about 4 seconds more.

After a call fails UNAVAILABLE, ReconnectPoller.wake() waits for the channel to be ready
(grpc.channel_ready_future, whose subscription polls the channel) until it is READY, or until no
call has failed for QUIET_LIMIT seconds, so a client left idle beside a dead server does not
poll for ever. A channel that never fails is not polled at all: a polling thread beside the
calls costs them about a tenth of their speed.

Thread-safety: thread-safe.
"""

import threading
import time

import grpc

# How long polling goes on after the last failed call: longer than the channel's longest
# reconnect backoff (5 s, bloom_client.py), so an attempt begun while calls failed is seen
# through.
QUIET_LIMIT = 30.0


class ReconnectPoller:
    def __init__(self, channel):
        self._channel = channel
        self._lock = threading.Lock()
        self._ready = None  # the grpc.channel_ready_future being waited on, if any
        self._timer = None  # ends the wait once quiet
        self._poll_until = 0.0
        self._closed = False

    def on_error(self, error):
        """An RpcError from a call on the channel: UNAVAILABLE wakes the poller."""
        if isinstance(error, grpc.RpcError) and error.code() == grpc.StatusCode.UNAVAILABLE:
            self.wake()

    def wake(self):
        with self._lock:
            if self._closed:
                return
            self._poll_until = time.monotonic() + QUIET_LIMIT
            if self._ready is None or self._ready.done():
                self._ready = grpc.channel_ready_future(self._channel)
            if self._timer is None:
                self._start_timer(QUIET_LIMIT)

    def close(self):
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._ready is not None:
                self._ready.cancel()

    def _start_timer(self, seconds):  # with self._lock held
        self._timer = threading.Timer(seconds, self._on_timer)
        self._timer.daemon = True
        self._timer.start()

    def _on_timer(self):
        with self._lock:
            self._timer = None
            if self._closed or self._ready is None or self._ready.done():
                return
            left = self._poll_until - time.monotonic()
            if left > 0:  # calls failed since: wait for them to go quiet
                self._start_timer(left)
            else:
                self._ready.cancel()
