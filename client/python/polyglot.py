"""polyglot: the Python side of tests/polyglot_test.cc, where the C++, Python, Go and Node.js
clients add and check the same items in one filter and must agree on every answer.

    polyglot.py TARGET FILTER add|add-pipelined|check|check-pipelined < ITEMS
    polyglot.py WRITER,READER FILTER read-your-writes[-pipelined] < ITEMS
    polyglot.py TARGET FILTER cuckoo-add|remove|count < ITEMS

ITEMS: one hex-encoded item per line. Prints 1 or 0 per item. In the -pipelined modes every item
is its own call from its own thread (coalesced by the client). read-your-writes adds each item
through WRITER, hands the writer's last sequence to a client of READER (another pod), and
prints whether READER answers it present (tests/replication_test.cc). cuckoo-add adds to a
CUCKOO filter (created if missing), remove prints 1 or 0 per item removed, count the copies held
of each item. Exit 1 on an error.
"""

import sys
from concurrent.futures import ThreadPoolExecutor

import grpc

from bloom_client import BloomClient


def read_your_writes(targets, name, items, pipelined):
    writer_target, reader_target = targets.split(",")
    create = {"capacity": 10_000, "error_rate": 0.001}
    with BloomClient(writer_target, pipelined=pipelined) as writer, \
            BloomClient(reader_target, pipelined=pipelined) as reader:
        for item in items:
            writer.add(name, [item], create_if_missing=create)
            reader.observe_sequence(writer.last_sequence)
            sys.stdout.write("1\n" if reader.might_contain(name, [item])[0] else "0\n")


def main(target, name, mode):
    items = [bytes.fromhex(line.strip()) for line in sys.stdin if line.strip()]
    pipelined = mode.endswith("-pipelined")
    if mode.startswith("read-your-writes"):
        read_your_writes(target, name, items, pipelined)
        return
    if mode in ("cuckoo-add", "remove", "count"):
        with BloomClient(target) as client:
            if mode == "cuckoo-add":
                results = client.add(name, items, create_if_missing={
                    "capacity": 10_000, "error_rate": 0.001, "kind": "cuckoo"})
            elif mode == "remove":
                results = client.remove(name, items)
            else:
                sys.stdout.write("".join(f"{c}\n" for c in client.count(name, items)))
                return
        sys.stdout.write("".join("1\n" if r else "0\n" for r in results))
        return
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
