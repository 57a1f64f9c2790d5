"""The commit-log export format, its manifest, and verification.

An export is a directory::

    EXPORT/
        manifest.json                 written last (temp file + rename): no manifest, no export
        commitlog/
            00000000000000000000      the broker's files, byte for byte, named by start offset
            00000000001073741824      the last one is cut at the export's end offset

Every file but the last is the whole mapped file (records, then a blank end-of-file marker and padding),
so an export is itself a valid store directory. The last file stops at ``last_offset``, which is always a
record boundary found by decoding, never a torn record.

``manifest.json`` (``format`` = :data:`FORMAT`, ``version`` = :data:`FORMAT_VERSION`)::

    cluster, broker, broker_id, role     who the data came from (role: SYNC_MASTER, ASYNC_MASTER, SLAVE,
                                         or UNKNOWN)
    first_offset, last_offset            commit-log offsets: start of the first file, end of the last record
                                         (exclusive)
    records                              number of messages (blank markers not counted)
    created_ms                           when the export was written
    source                               how the end offset was chosen (store_dir, mode, limit, ...)
    files[]                              name, start_offset, file_size (in the store), size (exported bytes),
                                         data_end (file position where records end), records, sha256,
                                         split_points (record boundaries, file positions, ascending, first 0)

``split_points`` let a reader cut a file into tasks at exact record boundaries without scanning for one.

A directory without a manifest can still be read (a store directory or a bare ``commitlog`` directory, for
example copied from a RocketMQ broker): :func:`resolve_input` describes it with unknown checksums and one
split point per file. Verification needs a manifest.

Only the standard library and the model's ``common.record`` are used here, so ``admin`` can write exports and check
them without Spark.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pocketmq.common.errors import RecordFormatError
from pocketmq.common.record import Blank, decode_record

MANIFEST_NAME = "manifest.json"
COMMITLOG_DIR = "commitlog"
FORMAT = "pocketmq-commitlog-export"
FORMAT_VERSION = 1
FILE_NAME_DIGITS = 20
UNKNOWN = "UNKNOWN"
_HASH_CHUNK = 4 << 20


class ExportError(Exception):
    """An export (or a commit-log directory) that cannot be used as it is.

    ``path`` names the file concerned and ``offset`` the commit-log offset where the problem is, when known;
    both are also in the message, which is written for a person.
    """

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset


@dataclass(frozen=True, slots=True)
class ExportFile:
    """One commit-log file of an export."""

    name: str
    start_offset: int
    file_size: int
    size: int
    data_end: int
    records: int
    sha256: str
    split_points: tuple[int, ...] = (0,)

    @property
    def end_offset(self) -> int:
        """Commit-log offset where this file's records end."""
        return self.start_offset + self.data_end


@dataclass(frozen=True, slots=True)
class ExportManifest:
    """``manifest.json`` as a value (see the module docstring)."""

    cluster: str
    broker: str
    broker_id: int
    role: str
    first_offset: int
    last_offset: int
    records: int
    created_ms: int
    files: tuple[ExportFile, ...]
    source: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The manifest file's text."""
        data = {"format": FORMAT, "version": FORMAT_VERSION, **asdict(self)}
        return json.dumps(data, indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str, *, path: str = MANIFEST_NAME) -> ExportManifest:
        """Parse and check a manifest's text; :class:`ExportError` naming ``path`` when it is not one."""
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT:
                raise ExportError(f"{path}: not a PocketMQ commit-log export manifest", path=path)
            if data.get("version") != FORMAT_VERSION:
                raise ExportError(f"{path}: manifest version {data.get('version')!r}, this reader knows "
                                  f"{FORMAT_VERSION}", path=path)
            files = tuple(ExportFile(
                name=str(f["name"]), start_offset=int(f["start_offset"]), file_size=int(f["file_size"]),
                size=int(f["size"]), data_end=int(f["data_end"]), records=int(f["records"]),
                sha256=str(f["sha256"]), split_points=tuple(int(p) for p in f["split_points"]),
            ) for f in data["files"])
            manifest = cls(
                cluster=str(data["cluster"]), broker=str(data["broker"]), broker_id=int(data["broker_id"]),
                role=str(data["role"]), first_offset=int(data["first_offset"]),
                last_offset=int(data["last_offset"]), records=int(data["records"]),
                created_ms=int(data["created_ms"]), files=files, source=dict(data.get("source") or {}),
            )
        except ExportError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ExportError(f"{path}: malformed manifest ({type(exc).__name__}: {exc})", path=path) from None
        check_layout(manifest, path=path)
        return manifest


def check_layout(manifest: ExportManifest, *, path: str = MANIFEST_NAME) -> None:
    """The manifest's own arithmetic: contiguous files, data inside each file, totals that add up."""
    expected = manifest.first_offset
    for index, f in enumerate(manifest.files):
        where = f"{path}: file {f.name}"
        if f.name != file_name_for(f.start_offset):
            raise ExportError(f"{where}: name does not match start offset {f.start_offset}", path=path)
        if f.start_offset != expected:
            raise ExportError(f"{where}: starts at offset {f.start_offset}, expected {expected} (files are not "
                              "contiguous)", path=path, offset=expected)
        last = index == len(manifest.files) - 1
        if not 0 <= f.data_end <= f.size <= f.file_size or (not last and f.size != f.file_size):
            raise ExportError(f"{where}: inconsistent sizes (data_end {f.data_end}, size {f.size}, file_size "
                              f"{f.file_size})", path=path, offset=f.start_offset)
        points = f.split_points
        if not points or points[0] != 0 or any(b <= a for a, b in itertools.pairwise(points)) \
                or points[-1] > max(f.data_end, 0):
            raise ExportError(f"{where}: bad split points", path=path, offset=f.start_offset)
        expected = f.start_offset + f.file_size
    end = manifest.files[-1].end_offset if manifest.files else manifest.first_offset
    if manifest.last_offset != end:
        raise ExportError(f"{path}: last_offset {manifest.last_offset} but the files' data ends at {end}",
                          path=path, offset=end)
    if manifest.records != sum(f.records for f in manifest.files):
        raise ExportError(f"{path}: record count {manifest.records} does not match the files", path=path)


def file_name_for(offset: int) -> str:
    """The 20-digit name of the commit-log file starting at ``offset``."""
    return f"{offset:0{FILE_NAME_DIGITS}d}"


def is_commit_log_name(name: str) -> bool:
    """A commit-log file name: 20 digits."""
    return len(name) == FILE_NAME_DIGITS and name.isdigit()


def load_manifest(root: str | Path) -> ExportManifest:
    """Read ``root/manifest.json``; :class:`ExportError` when it is missing or malformed."""
    path = Path(root) / MANIFEST_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ExportError(f"{path}: no manifest (not an export, or the export did not finish)",
                          path=str(path)) from None
    except OSError as exc:
        raise ExportError(f"{path}: cannot read manifest: {exc}", path=str(path)) from None
    return ExportManifest.from_json(text, path=str(path))


# ------------------------------------------------------------------------------------------ inputs


@dataclass(frozen=True, slots=True)
class ExportInput:
    """One input of a reader: where its commit-log files are and what is known about them."""

    root: str
    """The path the user gave (export, store directory or bare commit-log directory), as given."""
    commitlog_dir: str
    manifest: ExportManifest
    has_manifest: bool

    def file_path(self, f: ExportFile) -> str:
        """Where ``f`` is on disk."""
        return os.path.join(self.commitlog_dir, f.name)


def resolve_input(path: str | Path) -> ExportInput:
    """Describe an export directory, or (without a manifest) a store directory or commit-log directory.

    With a manifest the files on disk must have the sizes it lists (a truncated export is reported here,
    before any task starts); without one every 20-digit file is taken whole.
    """
    root = str(path)
    if os.path.isfile(os.path.join(root, MANIFEST_NAME)):
        manifest = load_manifest(root)
        commitlog = os.path.join(root, COMMITLOG_DIR)
        found = ExportInput(root, commitlog, manifest, True)
        check_sizes(found)
        return found
    commitlog = os.path.join(root, COMMITLOG_DIR)
    if not os.path.isdir(commitlog):
        commitlog = root
    if not os.path.isdir(commitlog):
        raise ExportError(f"{root}: no such directory", path=root)
    names = sorted(n for n in os.listdir(commitlog) if is_commit_log_name(n))
    if not names and commitlog == root:
        raise ExportError(f"{root}: neither an export (no {MANIFEST_NAME}) nor a commit-log directory", path=root)
    files = []
    for name in names:
        size = os.path.getsize(os.path.join(commitlog, name))
        files.append(ExportFile(name=name, start_offset=int(name), file_size=size, size=size, data_end=size,
                                records=-1, sha256="", split_points=(0,)))
    first = files[0].start_offset if files else 0
    last = files[-1].start_offset + files[-1].size if files else 0
    manifest = ExportManifest(cluster=UNKNOWN, broker=os.path.basename(os.path.abspath(root)) or UNKNOWN,
                              broker_id=-1, role=UNKNOWN, first_offset=first, last_offset=last, records=-1,
                              created_ms=0, files=tuple(files), source={"mode": "raw-directory"})
    return ExportInput(root, commitlog, manifest, False)


def check_sizes(found: ExportInput) -> None:
    """Every file of the manifest is present with its listed size (cheap: ``stat`` only)."""
    for f in found.manifest.files:
        path = found.file_path(f)
        try:
            actual = os.path.getsize(path)
        except FileNotFoundError:
            raise ExportError(f"{path}: missing (commit-log offsets {f.start_offset}..{f.end_offset} of the export "
                              "are gone)", path=path, offset=f.start_offset) from None
        if actual < f.size:
            raise ExportError(f"{path}: truncated at commit-log offset {f.start_offset + actual} ({actual} of "
                              f"{f.size} bytes)", path=path, offset=f.start_offset + actual)
        if actual > f.size:
            raise ExportError(f"{path}: {actual} bytes, the manifest lists {f.size} (data was added after the "
                              f"export), from commit-log offset {f.start_offset + f.size}",
                              path=path, offset=f.start_offset + f.size)


# ------------------------------------------------------------------------------------------ verify


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """What :func:`verify_export` checked."""

    files: int
    bytes: int
    records: int | None
    """Records decoded (``None`` when only checksums were compared)."""


def sha256_of(path: str, size: int, progress: Callable[[int], None] | None = None) -> str:
    """SHA-256 of the first ``size`` bytes of ``path`` (all of it, when the sizes were checked)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        left = size
        while left > 0:
            chunk = f.read(min(_HASH_CHUNK, left))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
            if progress is not None:
                progress(len(chunk))
    return digest.hexdigest()


def walk_records(view: memoryview | bytes, *, base_offset: int, start: int = 0,
                 limit: int) -> Iterator[tuple[int, int]]:
    """``(position, size)`` of each valid record of a file from record boundary ``start`` up to ``limit``,
    decoded with the store's decoder (magic, sizes, PHYSICALOFFSET, body CRC); stops at a blank marker or at
    zeros. :class:`~pocketmq.common.errors.RecordFormatError` (offset = the file position) for anything else."""
    pos = start
    while pos < limit:
        try:
            record = decode_record(view, pos, limit=limit, check_crc=True, expected_offset=base_offset + pos)
        except RecordFormatError as exc:
            if exc.is_end_of_data:
                return
            raise RecordFormatError(exc.reason, pos) from None
        if isinstance(record, Blank):
            return
        yield pos, record.total_size
        pos += record.total_size


def _decode_file(path: str, f: ExportFile) -> int:
    """Decode every record of an exported file; the number of records. ``ExportError`` on damage."""
    if f.data_end == 0:
        return 0
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        count, end = 0, 0
        try:
            for pos, size in walk_records(view, base_offset=f.start_offset, limit=f.data_end):
                count, end = count + 1, pos + size
        except RecordFormatError as exc:
            offset = f.start_offset + exc.offset
            raise ExportError(f"{path}: corrupted record at commit-log offset {offset} (file position "
                              f"{exc.offset}): {exc.reason}", path=path, offset=offset) from None
        finally:
            view.release()
    if end != f.data_end:
        offset = f.start_offset + end
        raise ExportError(f"{path}: records end at commit-log offset {offset}, the manifest says "
                          f"{f.end_offset}", path=path, offset=offset)
    return count


def verify_export(root: str | Path, *, decode: bool = False,
                  progress: Callable[[int], None] | None = None) -> VerifyResult:
    """Check an export against its manifest: every file present, of its size, with its SHA-256.

    When a checksum does not match, the file is decoded to say where it is damaged. ``decode`` decodes
    every file (record count, magic, sizes, offsets, body CRCs) even when the checksums match.
    Raises :class:`ExportError` naming the file and commit-log offset.
    """
    found = resolve_input(root)
    if not found.has_manifest:
        raise ExportError(f"{root}: no {MANIFEST_NAME}, nothing to verify against", path=str(root))
    total_bytes, total_records = 0, 0
    for f in found.manifest.files:
        path = found.file_path(f)
        digest = sha256_of(path, f.size, progress)
        total_bytes += f.size
        if digest != f.sha256:
            _decode_file(path, f)  # raises with the position when the damage is in a record
            raise ExportError(f"{path}: SHA-256 does not match the manifest, though its records decode: the "
                              f"damage is outside the records (after commit-log offset {f.end_offset})",
                              path=path, offset=f.end_offset)
        if decode:
            count = _decode_file(path, f)
            if count != f.records:
                raise ExportError(f"{path}: {count} records, the manifest lists {f.records}", path=path,
                                  offset=f.start_offset)
            total_records += count
    return VerifyResult(len(found.manifest.files), total_bytes, total_records if decode else None)
