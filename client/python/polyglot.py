"""polyglot: the Python side of tests/polyglot_test.cc, where the C++, Python, Go and Node.js
clients add and check the same items in one filter and must agree on every answer.

    polyglot.py TARGET FILTER add|add-pipelined|check|check-pipelined < ITEMS

ITEMS: one hex-encoded item per line. Prints 1 or 0 per item. In the -pipelined modes every item
is its own call from its own thread (coalesced by the client). Exit 1 on an error.
"""

import sys
from concurrent.futures import ThreadPoolExecutor

import grpc

from bloom_client import BloomClient


def main(target, name, mode):
    items = [bytes.fromhex(line.strip()) for line in sys.stdin if line.strip()]
    pipelined = mode.endswith("-pipelined")
    with BloomClient(target, pipelined=pipelined) as client:
        if mode.startswith("add"):
            def call(batch):
                return client.add(name, batch,
                                  create_if_missing={"capacity": 10_000, "error_rate": 0.001})
        else:
            def call(batch):
                return client.might_contain(name, batch)
        if pipelined:
            with ThreadPoolExecutor(max_workers=32) as pool:
                results = [r for answer in pool.map(lambda item: call([item]), items)
                           for r in answer]
        else:
            results = call(items)
    sys.stdout.write("".join("1\n" if r else "0\n" for r in results))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    try:
        main(*sys.argv[1:])
    except grpc.RpcError as e:
        sys.exit(f"{e.code()}: {e.details()}")
