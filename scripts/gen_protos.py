"""Regenerate ``pocketmq/proxy/apis/*_pb2.py`` and their ``.pyi`` stubs from the vendored apache/rocketmq-apis protos.

The generated modules are committed (docs/design/grpc.md says why); run this after changing the vendored
``.proto`` files or the pinned generator, then commit the result::

    .venv/bin/python scripts/gen_protos.py          # rewrite the modules
    .venv/bin/python scripts/gen_protos.py --check  # exit 1 if the committed modules differ

It needs ``grpcio-tools`` at :data:`GENERATOR` (the dev extra pins it): the modules it writes require a protobuf
runtime at least as new as its protoc, which ``pyproject.toml``'s ``protobuf`` floor states. Only message classes
are generated (``--python_out``, ``--pyi_out``); the service table is written by hand in
``pocketmq/proxy/service.py``. The one change made to protoc's output: ``from apache.rocketmq.v2 import`` becomes
``from pocketmq.proxy.apis import`` (the descriptors keep their ``apache/rocketmq/v2/*.proto`` names).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APIS = ROOT / "pocketmq" / "proxy" / "apis"
PROTO_ROOT = APIS / "proto"
PROTOS = ("apache/rocketmq/v2/definition.proto", "apache/rocketmq/v2/service.proto")
GENERATOR = "1.85.1"
"""The grpcio-tools release the committed modules were generated with."""
_FOREIGN_IMPORT = "from apache.rocketmq.v2 import "
_OUR_IMPORT = "from pocketmq.proxy.apis import "


def generate(out: Path) -> dict[str, str]:
    """File name → text of every generated module, written under ``out`` first."""
    from grpc_tools import protoc  # type: ignore[import-untyped]

    include = str(Path(protoc.__file__).parent / "_proto")
    args = ["protoc", f"-I{PROTO_ROOT}", f"-I{include}", f"--python_out={out}", f"--pyi_out={out}", *PROTOS]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    files = {}
    for path in sorted((out / "apache" / "rocketmq" / "v2").iterdir()):
        files[path.name] = path.read_text(encoding="utf-8").replace(_FOREIGN_IMPORT, _OUR_IMPORT)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed modules, write nothing")
    args = parser.parse_args(argv)
    installed = importlib.metadata.version("grpcio-tools")
    if installed != GENERATOR:
        print(f"grpcio-tools {installed} is installed; the modules are generated with {GENERATOR}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        files = generate(Path(tmp))
    differ = [name for name, text in files.items()
              if not (APIS / name).is_file() or (APIS / name).read_text(encoding="utf-8") != text]
    if args.check:
        for name in differ:
            print(f"{name} differs from what the vendored protos generate", file=sys.stderr)
        return 1 if differ else 0
    for name, text in files.items():
        (APIS / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} files to {APIS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
