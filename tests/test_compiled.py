"""The compiled hot path (:mod:`pocketmq.common.compiled`): the build that runs is the one asked for, the pure switch
works at import time, and the compiled and pure builds write and read the very same bytes.

CI runs the suite twice: ``make test`` with the compiled build (``POCKETMQ_REQUIRE_COMPILED=1``: a build that
silently fell back to source fails here) and ``make test-pure`` with ``POCKETMQ_PURE_PYTHON=1``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.common import compiled

ROOT = Path(__file__).resolve().parent.parent

# A child prints, for the build it was started with, what each compiled module was loaded from and the bytes the
# codecs produce (a record, a decoded record, a frame, a batch body, a batch body's records and ids, the messages
# of a pull body), and the digest of the index file the index walk writes for a sample of records
# (tests/index/kernel_sample.py).
_PROBE = r"""
import json, importlib
import pocketmq.common.compiled as c
from pocketmq.common.record import decode_record, check_record, message_id
from pocketmq.common.record_encoder import encode_record
from pocketmq.common.batch import BatchEntry, encode_batch_body, decode_batch_body
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.serialization import decode_header, encode_header
from pocketmq.remoting.frame import FrameDecoder, encode_frame
import tempfile
from tests.index.kernel_sample import index_digest
with tempfile.TemporaryDirectory(prefix="pocketmq-probe-") as scratch:
    index = index_digest(scratch)
rec = encode_record(topic="T\u00e9", body=b"\x00\x01body", properties="TAGS\x01a\x02KEYS\x01k1 k2",
                    queue_id=3, queue_offset=9, physical_offset=777, born_timestamp=1, store_timestamp=2,
                    born_host=bytes(16) + b"\x00\x00\x00\x05")
cmd = RemotingCommand(310, opaque=5, flag=0, remark="r\u00e9", ext_fields={"a": "1", "b": "x"}, body=b"payload",
                      serialize_type=1)
frame = encode_frame(cmd)
back = FrameDecoder().feed(frame)[0]
headers = [encode_header(RemotingCommand(11, opaque=9, ext_fields={"k": "v"}, serialize_type=t)) for t in (0, 1, 0x4D)]
decoded_headers = [repr(decode_header(t, h)) for t, h in zip((0, 1, 0x4D), headers)]
batch = encode_batch_body([BatchEntry(1, b"b1", "K\x01v"), BatchEntry(2, b"", "")])
from pocketmq.common.record import HEADER_STRUCTS
from pocketmq.common.record_encoder import encode_batch_records_into, joined_message_ids, count_batch_entries
tagged = encode_batch_body([BatchEntry(1, b"b1", "TAGS\x01a\x02K\x01v"), BatchEntry(2, b"", ""),
                            BatchEntry(3, b"b3" * 50, "TAGS\x01a\x02"), BatchEntry(4, b"b4", "XTAGS\x01z")])
out = bytearray(4096)
end, units = encode_batch_records_into(memoryview(out), 8, 4096, HEADER_STRUCTS[1], tagged, b"\x02T\xc3",
                                       b"CLUSTER\x01c", 0x10, 2, 77, 5, bytes(16) + b"\x00\x00\x00\x07", 6,
                                       b"\x7f\0\0\1\0\0\0\2",
                                       lambda props, value, plain: len(value) * 1000 + plain + len(props))
from pocketmq.client.consumer.fast_decode import decode_records
from pocketmq.client.consumer.pull_result import _decode
from pocketmq.client.core.message_ext import MessageExt
v4 = encode_record(topic="T4", body=b"four", properties="K\x01v", queue_id=1, queue_offset=10, physical_offset=900,
                   born_timestamp=3, store_timestamp=4, born_host=b"\x7f\x00\x00\x01\x00\x00\x00\x07")
pulled = [[repr([getattr(m, f) for f in MessageExt.__slots__]) for m in d(v4 + v4 + rec + v4, broker_name="b",
           properties_suffix="\x02MAX_OFFSET\x0111")] for d in (decode_records, _decode)]
print(json.dumps({
    "active": c.ACTIVE,
    "files": {m: importlib.import_module(m).__file__.rsplit("/", 1)[-1] for m in c.MODULES},
    "record": rec.hex(), "decoded": repr(decode_record(rec, expected_offset=777)),
    "dispatch": repr(check_record(rec, 0, len(rec), base_offset=777)), "msg_id": message_id(b"\x7f\0\0\1\0\0\0\1", 9),
    "frame": frame.hex(), "back": repr(back), "headers": [h.hex() for h in headers],
    "decoded_headers": decoded_headers, "batch": batch.hex(), "entries": repr(decode_batch_body(batch)),
    "batch_records": out[:end].hex(), "units": units, "count": count_batch_entries(tagged),
    "batch_ids": joined_message_ids(b"\x7f\0\0\1\0\0\0\2", [u[0] for u in units]),
    "pulled": pulled,
    "index": index,
}))
"""


def _probe(pure: bool) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != compiled.PURE_ENV}
    if pure:
        env[compiled.PURE_ENV] = "1"
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    result: dict[str, object] = json.loads(out)
    return result


def _built() -> bool:
    """Every module has an extension that is not older than its source (whatever the switch says)."""
    extensions = [(compiled.source_path(name), compiled.extension_path(name)) for name in compiled.MODULES]
    return all(ext is not None and not compiled.is_stale(src, ext) for src, ext in extensions)


def test_active_build_matches_the_loaded_modules() -> None:
    modules = [importlib.import_module(name) for name in compiled.MODULES]
    if compiled.pure_requested():
        assert compiled.ACTIVE == "pure"
    if os.environ.get("POCKETMQ_REQUIRE_COMPILED") == "1":
        assert compiled.ACTIVE == "cython", "the compiled build was required but is not (or not wholly) active"
    if compiled.ACTIVE == "cython":
        assert all(compiled.loaded_from_extension(m) and m.__file__.endswith(".so") for m in modules)  # type: ignore[union-attr]
    if compiled.ACTIVE == "pure":
        assert all(m.__file__ is not None and m.__file__.endswith(".py") for m in modules)


def test_pure_switch_and_both_builds_write_the_same_bytes() -> None:
    pure = _probe(pure=True)
    assert pure["active"] == "pure"
    assert all(str(name).endswith(".py") for name in pure["files"].values())  # type: ignore[attr-defined]
    if not _built():
        pytest.skip("no up-to-date compiled build here (make compiled): the pure build alone was checked")
    native = _probe(pure=False)
    assert native["active"] == "cython"
    assert all(str(name).endswith(".so") for name in native["files"].values())  # type: ignore[attr-defined]
    assert {k: v for k, v in native.items() if k not in ("active", "files")} == \
        {k: v for k, v in pure.items() if k not in ("active", "files")}


def test_a_source_edited_after_the_build_is_stale(tmp_path: Path) -> None:
    source, extension = tmp_path / "m.py", tmp_path / "m.so"
    source.write_text("")
    extension.write_bytes(b"")
    os.utime(extension, (1_000_000, 1_000_000))
    os.utime(source, (1_000_000 + compiled.STALE_SLACK_S / 2, 1_000_000 + compiled.STALE_SLACK_S / 2))
    assert not compiled.is_stale(source, extension)
    os.utime(source, (1_000_000 + compiled.STALE_SLACK_S + 1, 1_000_000 + compiled.STALE_SLACK_S + 1))
    assert compiled.is_stale(source, extension)


def test_the_package_installs_the_switch_first() -> None:
    # The finder must be in place before a compiled module can be imported: ``pocketmq/__init__.py``, which runs
    # before any module of the package, imports pocketmq.common.compiled before anything else of ours.
    init = (ROOT / "pocketmq" / "__init__.py").read_text()
    ours = [line for line in init.splitlines() if line.startswith(("import pocketmq", "from pocketmq"))]
    assert ours[0].startswith("import pocketmq.common.compiled")


def test_finder_answers_only_for_compiled_modules() -> None:
    finder = compiled.SourceFinder(pure=True)
    assert finder.find_spec("pocketmq.common.errors", None) is None
    assert finder.find_spec("pocketmq.common.errors", [str(ROOT / "pocketmq" / "common")]) is None
    spec = finder.find_spec("pocketmq.common.record", [str(ROOT / "pocketmq" / "common")])
    if compiled.extension_path("pocketmq.common.record") is not None:
        assert spec is not None and spec.origin == str(ROOT / "pocketmq" / "common" / "record.py")
    else:
        assert spec is None  # no extension: Python's own finder loads the source anyway


def test_the_finder_is_installed_only_when_the_sources_must_win() -> None:
    """A plain import runs the extension when there is one: the finder goes on ``sys.meta_path`` only for the
    pure switch (or a stale in-place build), so an application importing pocketmq keeps its import system."""
    code = ("import sys; before = list(sys.meta_path); import pocketmq.common.compiled as c; "
            "print(c.ACTIVE, any(type(f).__name__ == 'SourceFinder' for f in sys.meta_path))")
    env = {k: v for k, v in os.environ.items() if k != compiled.PURE_ENV}
    plain = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=60, check=True).stdout.split()
    pure = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**env, compiled.PURE_ENV: "1"},
                          capture_output=True, text=True, timeout=60, check=True).stdout.split()
    built = any(compiled.extension_path(name) is not None for name in compiled.MODULES)
    assert pure == ["pure", str(built)]  # no extension to hide: nothing to install
    if plain[0] == "cython":
        assert plain[1] == "False"


def test_typed_modules_run_without_cython_installed() -> None:
    """A plain ``pip install`` on a machine without Cython runs the typed modules from source: their byte-exact
    tests pass with ``import cython`` failing (the plain-Python names of :mod:`pocketmq.common.pure_mode`)."""
    code = (
        "import sys; sys.modules['cython'] = None; import pytest; "
        "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', *sys.argv[1:]]))"
    )
    tests = ["tests/store/test_dispatch_kernel.py", "tests/index/test_kernel.py",
             "tests/client/consumer/test_fast_decode.py", "tests/common"]
    env = {**os.environ, "POCKETMQ_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-c", code, *tests], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout


def test_an_in_place_build_removes_extensions_of_modules_no_longer_compiled(tmp_path: Path) -> None:
    """The finder is not always installed, so an extension left beside a source whose module left ``MODULES``
    must not survive ``make compiled`` (setup.py), while every listed module keeps its own."""
    spec = importlib.util.spec_from_file_location("pocketmq_setup_under_test", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    setup_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup_py)  # not __main__: defines its functions, runs no build
    common = tmp_path / "pocketmq" / "common"
    common.mkdir(parents=True)
    kept = [common / "record.cpython-311-x86_64-linux-gnu.so", common / "frame.abi3.so"]
    gone = [common / "old.cpython-311-x86_64-linux-gnu.so", tmp_path / "pocketmq" / "gone.so"]
    for path in [*kept, *gone]:
        path.write_bytes(b"")
    removed = setup_py.remove_stray_extensions(tmp_path, ["pocketmq.common.record", "pocketmq.common.frame"])
    assert sorted(removed) == ["pocketmq.common.old", "pocketmq.gone"]
    assert all(p.exists() for p in kept) and not any(p.exists() for p in gone)
