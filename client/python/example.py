"""Guards a cache against lookups of ids that do not exist (cache penetration).

With the wheel installed (client/python/pyproject.toml):  python3 example.py [HOST:PORT]
In this tree:  PYTHONPATH=build/protos/python:client/python /usr/bin/python3 client/python/example.py
"""

import sys

from bloom_client import BloomClient


def main(target="127.0.0.1:50051"):
    with BloomClient(target) as client:
        client.reserve("example:user-ids", capacity=100_000, error_rate=0.001)
        client.add("example:user-ids", range(1000, 2000))  # ids that exist
        for user_id in (1500, 424242):
            if client.might_contain("example:user-ids", [user_id])[0]:
                print(f"{user_id}: may exist, look it up")
            else:
                print(f"{user_id}: does not exist, skip the database")
        print(client.stats("example:user-ids"))


if __name__ == "__main__":
    main(*sys.argv[1:])
