"""Builds the Python client's wheel (pyproject.toml holds its metadata).

Two things need code: the version, read from the project's one version number in the top-level
CMakeLists.txt, and the bloom.v1 stubs, generated from protos/bloom/v1/bloom.proto into the
wheel by protoc and grpc_python_plugin (Debian's protobuf-compiler and protobuf-compiler-grpc,
the tools the CMake build uses), so the wheel needs nothing from a build directory.
"""

import pathlib
import re
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
PROTO = ROOT / "protos" / "bloom" / "v1" / "bloom.proto"


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(bloom_server VERSION ([0-9.]+)", text)
    if match is None:
        raise RuntimeError(f"no project(bloom_server VERSION ...) in {ROOT / 'CMakeLists.txt'}")
    return match.group(1)


class BuildWithStubs(build_py):
    """build_py, then the bloom.v1 stubs beside the modules."""

    def run(self):
        super().run()
        out = pathlib.Path(self.build_lib)
        plugin = shutil.which("grpc_python_plugin")
        if plugin is None or shutil.which("protoc") is None:
            raise RuntimeError("protoc and grpc_python_plugin are needed: "
                               "apt-get install protobuf-compiler protobuf-compiler-grpc")
        subprocess.run(["protoc", f"--proto_path={ROOT / 'protos'}", f"--python_out={out}",
                        f"--grpc_out={out}", f"--plugin=protoc-gen-grpc={plugin}", str(PROTO)],
                       check=True)
        for package in ("bloom", "bloom/v1"):
            (out / package / "__init__.py").touch()


setup(version=project_version(), cmdclass={"build_py": BuildWithStubs})
