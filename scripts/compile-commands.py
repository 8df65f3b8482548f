#!/usr/bin/env python3
"""Gives a unity build's compile_commands.json one entry per source, for clang-tidy and clangd.

In a unity build (BLOOM_UNITY_BUILD, CMakeLists.txt) CMake lists only the generated batch files
(.../Unity/unity_N_cxx.cxx), each of which #includes a few of a target's sources. Tools that look
up a source's flags by its own path then find none. This rewrites the file in place: each batch
entry becomes one entry per source it includes, with the batch's command compiling that source
alone. Entries of sources outside a batch are kept as they are, and running it twice changes
nothing. scripts/build.sh runs it after every configure.

usage: scripts/compile-commands.py BUILD_DIR
"""

import json
import re
import sys
from pathlib import Path

BATCH = re.compile(r"/Unity/unity_\d+_cxx\.cxx$")
INCLUDE = re.compile(r'^#include "(.+)"$')


def sources_of(batch_file: Path) -> list[str]:
    with batch_file.open() as text:
        return [m.group(1) for line in text if (m := INCLUDE.match(line.strip()))]


def expand(entry: dict) -> list[dict]:
    batch = entry["file"]
    if not BATCH.search(batch):
        return [entry]
    expanded = []
    for source in sources_of(Path(batch)):
        one = dict(entry, file=source)
        one["command"] = entry["command"].replace(f"-c {batch}", f"-c {source}")
        one["command"] = re.sub(r"-o \S+", f"-o {Path(source).name}.o", one["command"], count=1)
        expanded.append(one)
    return expanded


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path = Path(sys.argv[1]) / "compile_commands.json"
    if not path.exists():
        return 0  # not configured with CMAKE_EXPORT_COMPILE_COMMANDS: nothing to rewrite
    entries = json.loads(path.read_text())
    rewritten = [one for entry in entries for one in expand(entry)]
    path.write_text(json.dumps(rewritten, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
