"""Build hook: generate the protobuf and gRPC modules from proto/ with grpcio-tools.

Generated code is built, never edited or committed. It lands in recommender/_proto/ so that a
regular install ships it and an editable install finds it in the source tree.
"""

from __future__ import annotations

import re
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent.resolve()
PROTO_ROOT = ROOT / "proto"
OUT = ROOT / "recommender" / "_proto"


def generate() -> None:
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    sources = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={OUT}",
        f"--pyi_out={OUT}",
        f"--grpc_python_out={OUT}",
        *sources,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")
    # protoc writes modules under their proto package path (intelliscale/recommender/v1/) and
    # the gRPC module imports its messages by that absolute name; make the import relative so the
    # generated tree lives inside our package instead of claiming a top-level `intelliscale`.
    for path in OUT.rglob("*_pb2_grpc.py"):
        text = path.read_text()
        text = re.sub(r"^from intelliscale\.recommender\.v1 import ", "from . import ", text,
                      flags=re.M)
        path.write_text(text)
    for directory in {p.parent for p in OUT.rglob("*_pb2.py")}:
        while directory != OUT:
            (directory / "__init__.py").touch()
            directory = directory.parent


class BuildPyWithProto(build_py):
    def run(self) -> None:
        generate()
        # Packages were listed before generation; add the generated ones.
        found = {
            ".".join(p.parent.relative_to(ROOT).parts)
            for p in OUT.rglob("__init__.py")
        }
        self.packages = sorted(set(self.packages or []) | found)
        super().run()


setup(
    cmdclass={"build_py": BuildPyWithProto},
    packages=[
        *find_packages(include=["recommender", "recommender.*"]),
        "recommender.data",  # the catalog's JSON: a folder of data, no module
        "recommender.migrations",
        "recommender.migrations.versions",
    ],
    package_dir={"recommender.migrations": "migrations"},
)
