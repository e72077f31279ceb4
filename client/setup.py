"""Build hook: generate the message and stub modules from the recommender's proto/ contract.

Generated code is built, never edited or committed. The contract is found, in order, in
`$RECOMMENDER_PROTO_DIR`, in `proto/` beside this file (a symbolic link to `../proto` in the
repository, real files in an sdist, see MANIFEST.in) and in `../proto`. So `pip install ./client`
(built in place), `pip install -e ./client` and a wheel built from the sdist in a temporary
folder all find it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent.resolve()
PACKAGE = "recommender_client"
OUT = HERE / PACKAGE / "_proto"


def proto_root() -> Path:
    candidates = [Path(p) for p in [os.environ.get("RECOMMENDER_PROTO_DIR", "")] if p]
    candidates += [HERE / "proto", HERE.parent / "proto"]
    for candidate in candidates:
        if any(candidate.resolve().rglob("*.proto")):
            return candidate.resolve()
    raise RuntimeError(
        "the recommender's proto/ contract was not found (looked in "
        + ", ".join(str(c) for c in candidates)
        + "); build from the repository or its sdist, or set RECOMMENDER_PROTO_DIR")


def generate() -> None:
    import grpc_tools
    from grpc_tools import protoc

    root = proto_root()
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    OUT.mkdir(exist_ok=True)
    (OUT / "__init__.py").write_text('"""Generated from proto/ at build time (setup.py)."""\n')
    sources = sorted(str(p.relative_to(root)) for p in root.rglob("*.proto"))
    args = ["grpc_tools.protoc", f"-I{root}", f"-I{well_known}", f"--python_out={OUT}",
            f"--pyi_out={OUT}", f"--grpc_python_out={OUT}", *sources]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")
    # protoc's gRPC module imports its messages by the proto package's absolute name: make it
    # relative, so the generated tree lives inside this package instead of claiming a
    # top-level `intelliscale` (which the server's own generated tree would clash with).
    for path in OUT.rglob("*_pb2_grpc.py"):
        text = re.sub(r"^from intelliscale\.recommender\.v1 import ", "from . import ",
                      path.read_text(), flags=re.M)
        path.write_text(text)
    for directory in {p.parent for p in OUT.rglob("*_pb2.py")}:
        while directory != OUT:
            (directory / "__init__.py").touch()
            directory = directory.parent


class BuildPyWithProto(build_py):
    def run(self) -> None:
        generate()
        found = {".".join(p.parent.relative_to(HERE).parts) for p in OUT.rglob("__init__.py")}
        self.packages = sorted(set(self.packages or []) | found)
        super().run()


setup(cmdclass={"build_py": BuildPyWithProto}, packages=[PACKAGE])
