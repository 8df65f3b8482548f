#!/usr/bin/python3
"""Fails when a project #include runs against the layer order docs/architecture.md gives.

The server's layers, lowest first; a file may include its own folder and the folders below:

  common < bloom < storage < metrics < service < replication < coordination < server

Beside them: client/ (the C++ client and bloom-cli) sees only common/ and itself, not the
server; loadtest/ sees client/, bloom/ and common/; fuzz/ and benchmarks/ see the server's
layers and client/; tests/ (integration tests) sees everything; tests/support/ (what any test
may use: processes, items, files) sees only common/. A unit test (*_test.cc) or test fixture
(*_fixture.h) beside the code of a layer sees what that layer sees, and tests/support/.

It also fails when the server's code (not its tests) uses a lock the compiler's thread-safety
analysis cannot see: std::mutex, std::condition_variable or absl::Mutex outside
common/blocking_mutex.h, which wraps them (bloomsync::Mutex, BlockingMutex, CondVar are the
server's locks).

Two layers see the store through a narrow interface, not storage/filter_store.h (outside their
tests): metrics/ through FiguresSource (storage/store_figures.h), replication/ through
ReplicatedStore (storage/replica/replicated_store.h).

Generated code (the .proto stubs: bloom/v1/, bloom/replication/v1/, etcd's API) is not in the
source tree and is not checked. Usage: scripts/check-layers.py [SOURCE_DIR]; ctest runs it
(test layering).
"""
import os
import re
import sys

ORDER = ["common", "bloom", "storage", "metrics", "sharding", "service", "replication",
         "coordination", "server"]
SERVER_LAYERS = set(ORDER)
SUPPORT = "tests/support"
UNCHECKED_LOCK = re.compile(r"\bstd::(mutex|condition_variable|shared_mutex)\b|\babsl::Mutex\b")
LOCK_WRAPPERS = {"common/blocking_mutex.h", "common/mutex.h"}
# Layers that see the store through a narrow interface, and the interface.
NARROW = {"metrics": "storage/store_figures.h", "replication": "storage/replica/replicated_store.h"}
WHOLE_STORE = "storage/filter_store.h"


def allowed(folder):
    """The include folders a file in `folder` may name."""
    if folder in SERVER_LAYERS:
        return set(ORDER[: ORDER.index(folder) + 1])
    return {
        "client": {"common", "client"},
        "loadtest": {"common", "bloom", "client", "loadtest"},
        "fuzz": SERVER_LAYERS | {"client", "fuzz"},
        "benchmarks": SERVER_LAYERS | {"client", "benchmarks"},
        "tests": SERVER_LAYERS | {"client", "loadtest", "tests", SUPPORT},
        SUPPORT: {"common", SUPPORT},
    }.get(folder)


def folder_of(path):
    """The layer a source path (relative to the root) belongs to."""
    if path.startswith(SUPPORT + "/"):
        return SUPPORT
    return path.split("/", 1)[0]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    problems = []
    checked = 0
    for top in sorted(set(ORDER) | {"client", "loadtest", "fuzz", "benchmarks", "tests"}):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                folder = folder_of(path)
                may = set(allowed(folder))
                is_test = name.endswith(("_test.cc", "_fixture.h"))
                if is_test and folder in SERVER_LAYERS | {"client"}:
                    may.add(SUPPORT)
                with open(os.path.join(root, path), encoding="utf-8") as source:
                    text = source.read()
                checked += 1
                if (folder in SERVER_LAYERS and not is_test and path not in LOCK_WRAPPERS):
                    for number, line in enumerate(text.splitlines(), 1):
                        code = line.split("//", 1)[0]
                        if UNCHECKED_LOCK.search(code):
                            problems.append(f"{path}:{number}: a lock the thread-safety analysis "
                                            "cannot see; use bloomsync::Mutex or BlockingMutex "
                                            "and CondVar (common/blocking_mutex.h)")
                for target in include.findall(text):
                    if "/" not in target or not os.path.exists(os.path.join(root, target)):
                        continue  # a system or generated header
                    if folder_of(target) not in may:
                        problems.append(f"{path}: includes {target}: {folder} may include only "
                                        f"{', '.join(sorted(may))}")
                    elif target == WHOLE_STORE and folder in NARROW and not is_test:
                        problems.append(f"{path}: includes {target}: {folder} sees the store "
                                        f"through {NARROW[folder]}")
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-layers: {len(problems)} problems: includes against the layer order "
              "(docs/architecture.md) or unchecked locks")
        return 1
    print(f"check-layers: {checked} files follow the layer order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
