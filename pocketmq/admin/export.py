"""``rmq-admin export``: copy a consistent prefix of a broker's commit log, with a manifest.

What is copied: every commit-log file from the oldest one up to an end offset that is known complete, the
last file cut at a record boundary found by decoding (never a torn record), plus ``manifest.json`` (format in
:mod:`pocketmq.spark_jobs.manifest`). The end offset is chosen by :func:`plan_end`:

* **offline** (nobody holds the store's ``lock``): the end of the valid data, as recovery would find it:
  records are decoded (magic, sizes, PHYSICALOFFSET, body CRC) until zeros or damage. We keep the lock
  while copying so a broker cannot start and rewrite the tail under us. Damage in the last file with data
  is a torn tail from a crash and ends the export (recorded in the manifest); damage anywhere earlier is an
  error naming the file and offset.
* **live** (a broker holds the lock): the broker is appending beyond its flushed offset, so the export ends
  at what it has flushed: ``rmq-admin export`` asks that broker (``GET_BROKER_RUNTIME_INFO``) at the
  address it recorded in the store (``broker.addr``, :mod:`pocketmq.broker.address_file`), or at
  ``--broker-addr``, for its flushed offset (``--consistency flushed``: everything a SYNC_FLUSH broker has
  acknowledged) or the smaller of it and the best slave acknowledgement (``replicated``: only what a slave
  also has). The answer must come from the broker that owns ``--store-dir`` (its ``storePathRootDir``).
  The bytes are still copied from ``--store-dir``: reading a file that the broker appends to is safe below
  an offset that it has flushed, and copying from disk is far faster than any request/response path. A
  slave acknowledgement may fall inside a record (replication sends 32 KiB chunks); the cut moves back to
  the record boundary before it.
* **live, nobody to ask** (a RocketMQ broker records no address; :func:`export_commit_log` called without
  ``broker_end``): the ``checkpoint``, which lags the flushed data by up to a second, and the command says
  so. PocketMQ writes the exact flushed offset there; a RocketMQ checkpoint has only the store time of the
  last flushed record (``physicMsgTimestamp``): then records are taken while their store time is not later
  than it.
* ``--up-to OFFSET``: never beyond this offset (any mode).

Why copy a live broker's files rather than stream them over the network: the broker has no request that
reads raw commit-log ranges (the HA protocol starts a new slave at the master's last file), a copy runs at
disk speed, and below the flushed offset the files never change, so the copy is as consistent as a
stream would be. It requires running on the broker's host, which is where operators run exports anyway.

Files are opened before anything is read, so retention deleting the oldest file during the copy does not
matter. Each file is copied to ``NAME.part``, fsynced and renamed; the manifest is written last, so an
interrupted export has no manifest and every reader refuses it.

An export that holds no record (an empty store, a broker that has flushed nothing yet, ``--up-to`` below the
first record) writes nothing: ``rmq-admin export`` says why and exits with :data:`EXIT_NOTHING` (3).

``rmq-admin verify-export DIR`` checks an export against its manifest (:func:`spark_jobs.manifest.verify_export`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import hashlib
import itertools
import json
import mmap
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pocketmq.admin.broker_end import broker_end_offset
from pocketmq.broker.address_file import ADDRESS_FILE, read_address
from pocketmq.common.config import ConfigError, load_properties
from pocketmq.common.errors import RecordFormatError
from pocketmq.common.files import fsync_directory, write_atomically
from pocketmq.common.record import Blank, decode_record
from pocketmq.spark_jobs.manifest import (
    COMMITLOG_DIR,
    MANIFEST_NAME,
    UNKNOWN,
    ExportError,
    ExportFile,
    ExportManifest,
    is_commit_log_name,
    verify_export,
)
from pocketmq.store.checkpoint import StoreCheckpoint

DEFAULT_SPLIT_INTERVAL = 4 << 20
"""A split point (a record boundary a reader may start a task at) at least every 4 MiB."""
_COPY_CHUNK = 4 << 20
_PROGRESS_INTERVAL_S = 1.0
EXIT_NOTHING = 3
"""``rmq-admin export``'s exit status when there was nothing to export (0: exported, 1: error, 2: usage)."""


@dataclass(frozen=True, kw_only=True)
class BrokerIdentity:
    """Who the data belongs to, written into the manifest."""

    cluster: str = "DefaultCluster"
    broker: str = UNKNOWN
    broker_id: int = -1
    role: str = UNKNOWN


@dataclass(frozen=True, kw_only=True)
class EndPlan:
    """Where the export may end: an offset, a store time, or neither (the end of the valid data)."""

    mode: str
    """``offline``, ``live-checkpoint``, ``live-checkpoint-timestamp``, plus ``+up-to`` when capped."""
    limit_offset: int | None = None
    limit_timestamp: int | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ExportProgress:
    """Where a running export is; handed to the progress callback."""

    files_done: int = 0
    files_total: int = 0
    bytes_done: int = 0
    bytes_total: int = 0
    records: int = 0
    current: str = ""
    finished: bool = False


ProgressCallback = Callable[[ExportProgress], None]


# ------------------------------------------------------------------------------------------- locking


@contextlib.contextmanager
def store_lock(store_dir: str) -> Iterator[bool]:
    """Try the store's ``lock`` without waiting; yields True (we hold it: nobody runs on the store) or False.

    PocketMQ locks it with ``flock``, RocketMQ (Java ``FileChannel.tryLock``) with a POSIX record lock, so
    both are tried. A store without a ``lock`` file has never been opened by a broker: offline.
    """
    path = os.path.join(store_dir, "lock")
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases both locks


def live_broker(store_dir: str) -> tuple[bool, str | None]:
    """Whether a broker holds the store's lock, and the address it recorded in the store (``None``: none)."""
    with store_lock(store_dir) as offline:
        if offline:
            return False, None
    return True, read_address(store_dir)


def plan_end(store_dir: str, *, offline: bool, up_to: int | None = None, broker_end: int | None = None) -> EndPlan:
    """Choose the end of the export (see the module docstring).

    ``broker_end`` is what a running broker itself reported as safe (flushed or replicated); it replaces
    the checkpoint, which lags it by up to a second. ``up_to`` only ever lowers the end.
    """
    if offline:
        plan = EndPlan(mode="offline")
    elif broker_end is not None:
        plan = EndPlan(mode="live-broker", limit_offset=broker_end, details={"broker_end_offset": broker_end})
    else:
        checkpoint = StoreCheckpoint.load(os.path.join(store_dir, "checkpoint"))
        if checkpoint.has_offsets:
            plan = EndPlan(mode="live-checkpoint", limit_offset=checkpoint.physic_offset,
                           details={"checkpoint_physic_offset": checkpoint.physic_offset})
        elif checkpoint.physic_msg_timestamp > 0:
            plan = EndPlan(mode="live-checkpoint-timestamp", limit_timestamp=checkpoint.physic_msg_timestamp,
                           details={"checkpoint_physic_msg_timestamp": checkpoint.physic_msg_timestamp})
        else:
            raise ExportError(f"{store_dir}: a broker is running on this store and its checkpoint says nothing "
                              "about what is flushed; stop it, or give --broker-addr")
    if offline and broker_end is not None:
        up_to = broker_end if up_to is None else min(up_to, broker_end)
    if up_to is None:
        return plan
    limit = up_to if plan.limit_offset is None else min(up_to, plan.limit_offset)
    return EndPlan(mode=plan.mode + "+up-to", limit_offset=limit, limit_timestamp=plan.limit_timestamp,
                   details={**plan.details, "up_to": up_to})


# ------------------------------------------------------------------------------------------- scanning


@dataclass(frozen=True, slots=True)
class _SourceFile:
    path: str
    name: str
    start: int
    size: int
    fd: int


@dataclass(frozen=True, slots=True)
class _Scan:
    data_end: int
    records: int
    split_points: tuple[int, ...]
    ended_by: str
    """``complete`` (a blank marker: the file is whole), ``end-of-data`` (zeros), ``limit`` or ``damage``."""
    damage: str | None = None


def _open_sources(commitlog: str) -> list[_SourceFile]:
    names = sorted(n for n in os.listdir(commitlog) if is_commit_log_name(n))
    files: list[_SourceFile] = []
    try:
        for name in names:
            path = os.path.join(commitlog, name)
            fd = os.open(path, os.O_RDONLY)
            files.append(_SourceFile(path, name, int(name), os.fstat(fd).st_size, fd))
        for prev, cur in itertools.pairwise(files):
            if cur.start != prev.start + prev.size:
                raise ExportError(f"{cur.path}: starts at offset {cur.start} but the previous file ends at "
                                  f"{prev.start + prev.size} (a file is missing or has the wrong size)",
                                  path=cur.path, offset=prev.start + prev.size)
    except BaseException:
        for f in files:
            os.close(f.fd)
        raise
    return files


def _has_data(f: _SourceFile) -> bool:
    return f.size >= 8 and any(os.pread(f.fd, 8, 0))


def _scan_file(f: _SourceFile, view: memoryview, plan: EndPlan, *, tail_may_be_torn: bool,
               split_interval: int, on_records: Callable[[int], None]) -> _Scan:
    """Decode the records of one file until it ends, the plan's limit, or damage.

    Nothing at or past the offset limit is decoded: a live broker may be writing there.
    """
    limit = f.size if plan.limit_offset is None else max(0, min(f.size, plan.limit_offset - f.start))
    limit_ts = plan.limit_timestamp
    pos, count = 0, 0
    points = [0]
    next_point = split_interval
    while pos < limit:
        try:
            record = decode_record(view, pos, limit=limit, check_crc=True, expected_offset=f.start + pos)
        except RecordFormatError as exc:
            if exc.is_end_of_data:
                return _Scan(pos, count, tuple(points), "end-of-data")
            if exc.reason == "truncated record" and limit < f.size:
                return _Scan(pos, count, tuple(points), "limit")  # the record straddles the limit
            if tail_may_be_torn:
                return _Scan(pos, count, tuple(points), "damage", exc.reason)
            raise ExportError(f"{f.path}: damaged record at commit-log offset {f.start + pos} (file position "
                              f"{pos}): {exc.reason}", path=f.path, offset=f.start + pos) from None
        if isinstance(record, Blank):
            return _Scan(pos, count, tuple(points), "complete")
        if limit_ts is not None and record.store_timestamp > limit_ts:
            return _Scan(pos, count, tuple(points), "limit")
        if pos >= next_point:
            points.append(pos)
            next_point = pos + split_interval
        pos += record.total_size
        count += 1
        if count & 0x3FFF == 0:
            on_records(0x4000)
    return _Scan(pos, count, tuple(points), "complete" if pos == f.size else "limit")


# ------------------------------------------------------------------------------------------- copying


def _copy(f: _SourceFile, size: int, dest: Path, progress: Callable[[int], None]) -> str:
    """Copy the first ``size`` bytes of ``f`` to ``dest`` (via ``dest.part``, fsynced); their SHA-256."""
    digest = hashlib.sha256()
    tmp = dest.with_name(dest.name + ".part")
    with open(tmp, "wb") as out:
        pos = 0
        while pos < size:
            chunk = os.pread(f.fd, min(_COPY_CHUNK, size - pos), pos)
            if not chunk:
                raise ExportError(f"{f.path}: shorter than expected while copying (at file position {pos})",
                                  path=f.path, offset=f.start + pos)
            digest.update(chunk)
            out.write(chunk)
            pos += len(chunk)
            progress(len(chunk))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, dest)
    return digest.hexdigest()


def export_commit_log(
    store_dir: str | Path,
    out_dir: str | Path,
    *,
    identity: BrokerIdentity = BrokerIdentity(),
    up_to: int | None = None,
    broker_end: int | None = None,
    split_interval: int = DEFAULT_SPLIT_INTERVAL,
    progress: ProgressCallback | None = None,
    source_details: dict[str, Any] | None = None,
) -> ExportManifest:
    """Export ``store_dir``'s commit log into ``out_dir`` (which must not exist or be empty).

    ``up_to`` caps the end offset; ``broker_end`` is the safe end a running broker reported
    (:func:`broker_end_offset`), used instead of its checkpoint (see :func:`plan_end`).

    Returns the manifest written. Raises :class:`~pocketmq.spark_jobs.manifest.ExportError` (naming the file and
    commit-log offset) for a damaged store, or when no safe end can be determined.
    """
    store = str(store_dir)
    commitlog = os.path.join(store, COMMITLOG_DIR)
    if not os.path.isdir(commitlog):
        raise ExportError(f"{store}: no {COMMITLOG_DIR} directory (not a store directory)", path=store)
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"{out}: exists and is not empty; export into a new directory", path=str(out))
    (out / COMMITLOG_DIR).mkdir(parents=True, exist_ok=True)
    state = ExportProgress()
    last_report = [0.0]

    def report(force: bool = False) -> None:
        now = time.monotonic()
        if progress is not None and (force or now - last_report[0] >= _PROGRESS_INTERVAL_S):
            last_report[0] = now
            progress(state)

    with store_lock(store) as offline:
        plan = plan_end(store, offline=offline, up_to=up_to, broker_end=broker_end)
        sources = _open_sources(commitlog)
        try:
            files, damage = _export_files(sources, out, plan, split_interval, state, report)
        finally:
            for f in sources:
                os.close(f.fd)
    first = sources[0].start if sources else 0
    manifest = ExportManifest(
        cluster=identity.cluster, broker=identity.broker, broker_id=identity.broker_id, role=identity.role,
        first_offset=files[0].start_offset if files else first,
        last_offset=files[-1].end_offset if files else first,
        records=sum(f.records for f in files), created_ms=int(time.time() * 1000), files=tuple(files),
        source={"store_dir": os.path.abspath(store), "mode": plan.mode, **plan.details, **(source_details or {}),
                **({"stopped_at_damage": damage} if damage else {})},
    )
    write_atomically(out / MANIFEST_NAME, manifest.to_json().encode())
    fsync_directory(out / COMMITLOG_DIR)
    state.finished = True
    state.bytes_total = state.bytes_done  # the estimate counted whole files; the last one was cut
    report(force=True)
    return manifest


def _export_files(sources: list[_SourceFile], out: Path, plan: EndPlan, split_interval: int,
                  state: ExportProgress, report: Callable[[bool], None]) -> tuple[list[ExportFile], dict[str, Any]]:
    """Scan and copy file after file until the export's end; the files and any torn-tail damage found."""
    with_data = [f for f in sources if _has_data(f)]
    last_with_data = with_data[-1].name if with_data else None
    limit = plan.limit_offset
    candidates = [f for f in sources if limit is None or f.start < limit or f.start == 0]
    counted = [f for f in candidates if f in with_data]
    state.files_total = len(counted)
    state.bytes_total = sum(min(f.size, limit - f.start) if limit is not None else f.size for f in counted)
    exported: list[ExportFile] = []
    damage: dict[str, Any] = {}

    def copied(n: int) -> None:
        state.bytes_done += n
        report(False)

    def scanned(n: int) -> None:
        state.records += n
        report(False)

    for f in candidates:
        state.current = f.name
        scan = _scan_with_mmap(f, plan, tail_may_be_torn=plan.mode == "offline" and f.name == last_with_data,
                               split_interval=split_interval, on_records=scanned)
        state.records += scan.records & 0x3FFF
        complete = scan.ended_by == "complete"
        if scan.data_end == 0 and not complete:
            break  # nothing of this file belongs to the export (a pre-allocated next file, or the limit)
        size = f.size if complete else scan.data_end
        digest = _copy(f, size, out / COMMITLOG_DIR / f.name, copied)
        exported.append(ExportFile(name=f.name, start_offset=f.start, file_size=f.size, size=size,
                                   data_end=scan.data_end, records=scan.records, sha256=digest,
                                   split_points=scan.split_points))
        state.files_done += 1
        if scan.ended_by == "damage":
            damage = {"file": f.name, "offset": f.start + scan.data_end, "reason": scan.damage}
        if not complete:
            _check_nothing_after(sources, f, scan)
            break
    return exported, damage


def _scan_with_mmap(f: _SourceFile, plan: EndPlan, **kw: Any) -> _Scan:
    if f.size == 0:
        return _Scan(0, 0, (0,), "end-of-data")
    with mmap.mmap(f.fd, f.size, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        try:
            return _scan_file(f, view, plan, **kw)
        finally:
            view.release()


def _check_nothing_after(sources: list[_SourceFile], last: _SourceFile, scan: _Scan) -> None:
    """Data that stops inside a file must not be followed by files holding records (a hole in the log)."""
    if scan.ended_by != "end-of-data":
        return
    for f in sources:
        if f.start > last.start and _has_data(f):
            raise ExportError(f"{last.path}: records stop at commit-log offset {last.start + scan.data_end} "
                              f"(zeros follow), but the later file {f.name} holds data: the log has a hole",
                              path=last.path, offset=last.start + scan.data_end)


# ------------------------------------------------------------------------------------------- CLI


def _identity_from(args: argparse.Namespace, props: dict[str, str], runtime: dict[str, str]) -> BrokerIdentity:
    role = args.role or props.get("brokerRole") or runtime.get("brokerRole") or UNKNOWN
    broker_id = args.broker_id if args.broker_id is not None else int(props.get("brokerId", "-1"))
    if broker_id < 0 and role in ("SYNC_MASTER", "ASYNC_MASTER"):
        broker_id = 0
    name = args.broker_name or props.get("brokerName") or os.path.basename(os.path.abspath(args.store_dir))
    return BrokerIdentity(cluster=args.cluster or props.get("brokerClusterName") or "DefaultCluster",
                          broker=name, broker_id=broker_id, role=role.upper())


def _progress_printer(stream: TextIO) -> ProgressCallback:
    def show(p: ExportProgress) -> None:
        mib = 1 << 20
        pct = 100.0 * p.bytes_done / p.bytes_total if p.bytes_total else 100.0
        state = "done" if p.finished else p.current
        stream.write(f"export: {state}: {p.files_done}/{p.files_total} files, {p.bytes_done / mib:.1f}/"
                     f"{p.bytes_total / mib:.1f} MiB ({pct:.0f}%), {p.records:,} records\n")
        stream.flush()
    return show


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``rmq-admin export``."""
    parser.add_argument("--store-dir", help="the broker's storePathRootDir (holds commitlog/ and checkpoint)")
    parser.add_argument("--out", required=True, help="new directory for the export")
    parser.add_argument("-c", "--config", help="broker .properties: cluster, name, id, role and store dir from it")
    parser.add_argument("--broker-addr", help="running broker (host:port) to ask for its flushed/replicated offset")
    parser.add_argument("--consistency", choices=("flushed", "replicated"), default="flushed",
                        help="with --broker-addr: up to the flushed offset, or what a slave also acknowledged")
    parser.add_argument("--up-to", type=int, help="export at most up to this commit-log offset")
    parser.add_argument("--cluster", help="cluster name for the manifest (default from -c, else DefaultCluster)")
    parser.add_argument("--broker-name", help="broker name for the manifest (default from -c, else the dir name)")
    parser.add_argument("--broker-id", type=int, help="broker id for the manifest (0 = master)")
    parser.add_argument("--role", help="SYNC_MASTER, ASYNC_MASTER or SLAVE for the manifest")
    parser.add_argument("--split-interval-mib", type=float, default=DEFAULT_SPLIT_INTERVAL / (1 << 20),
                        help="record-boundary index spacing for parallel readers (default 4)")
    parser.add_argument("--verify", action="store_true", help="decode and check the export after writing it")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def export_main(argv: list[str] | None = None) -> int:
    """``rmq-admin export`` (exit 0 on success, 1 on an export error, 2 on bad arguments, 3 when there was
    nothing to export)."""
    parser = argparse.ArgumentParser(prog="rmq-admin export", description="export a broker's commit log")
    add_export_arguments(parser)
    args = parser.parse_args(argv)
    try:
        props = load_properties(args.config) if args.config else {}
    except ConfigError as exc:
        parser.error(str(exc))
    args.store_dir = args.store_dir or props.get("storePathRootDir")
    if not args.store_dir:
        parser.error("--store-dir (or storePathRootDir in -c) is required")
    created = not os.path.exists(args.out)
    try:
        broker_end: int | None = None
        runtime: dict[str, str] = {}
        broker_addr = args.broker_addr or _recorded_broker(args.store_dir)
        if broker_addr:
            broker_end, runtime = broker_end_offset(broker_addr, consistency=args.consistency,
                                                    store_dir=args.store_dir)
        manifest = export_commit_log(
            args.store_dir, args.out, identity=_identity_from(args, props, runtime), up_to=args.up_to,
            broker_end=broker_end,
            split_interval=max(4096, int(args.split_interval_mib * (1 << 20))),
            progress=None if args.quiet else _progress_printer(sys.stderr),
            source_details={"broker_addr": broker_addr, "consistency": args.consistency,
                            "asked": "--broker-addr" if args.broker_addr else ADDRESS_FILE}
            if broker_addr else None,
        )
        if manifest.records == 0:
            print(f"rmq-admin export: nothing to export: {_nothing_reason(manifest)}; nothing written",
                  file=sys.stderr)
            _remove_export(Path(args.out), created)
            return EXIT_NOTHING
        if args.verify:
            verify_export(args.out, decode=True)
    except (ExportError, OSError) as exc:
        print(f"rmq-admin export: {exc}", file=sys.stderr)
        return 1
    summary = {"out": str(args.out), "first_offset": manifest.first_offset, "last_offset": manifest.last_offset,
               "records": manifest.records, "files": len(manifest.files), "mode": manifest.source.get("mode")}
    print(json.dumps(summary))
    return 0


def _recorded_broker(store_dir: str) -> str | None:
    """The address of the broker running on ``store_dir``, as it recorded it; ``None`` when the store is
    offline, or live with no record (then the export falls back to the checkpoint, and says so)."""
    live, addr = live_broker(store_dir)
    if live and addr is None:
        print(f"rmq-admin export: a broker runs on {store_dir} but recorded no address to ask ({ADDRESS_FILE}); "
              "exporting up to its checkpoint, which lags what it has flushed by up to a second "
              "(--broker-addr asks it)", file=sys.stderr)
    return addr


def _nothing_reason(manifest: ExportManifest) -> str:
    """Why an export holds no record, in the words of its plan."""
    source = manifest.source
    if not manifest.files and "broker_end_offset" not in source and "up_to" not in source:
        return "the store holds no records"
    if "up_to" in source and source["up_to"] <= manifest.first_offset:
        return f"--up-to {source['up_to']} is not beyond the first record at offset {manifest.first_offset}"
    if "broker_end_offset" in source:
        return (f"the broker has flushed nothing beyond offset {source['broker_end_offset']} "
                f"({source.get('consistency', 'flushed')})")
    if "checkpoint_physic_offset" in source or "checkpoint_physic_msg_timestamp" in source:
        return "the store's checkpoint covers no record yet"
    return "the store holds no records"


def _remove_export(out: Path, created: bool) -> None:
    """Take back an export that holds nothing: its files and manifest, and the directory when we made it."""
    for path in sorted(out.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_dir():
            path.rmdir()
        else:
            path.unlink()
    if created:
        out.rmdir()


def verify_main(argv: list[str] | None = None) -> int:
    """``rmq-admin verify-export DIR [--decode]``: 0 when the export matches its manifest, 1 otherwise."""
    parser = argparse.ArgumentParser(prog="rmq-admin verify-export", description="check an export")
    parser.add_argument("export", help="export directory (holds manifest.json)")
    parser.add_argument("--decode", action="store_true", help="also decode every record (counts, CRCs)")
    args = parser.parse_args(argv)
    try:
        result = verify_export(args.export, decode=args.decode)
    except (ExportError, OSError) as exc:
        print(f"rmq-admin verify-export: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"export": args.export, "ok": True, "files": result.files, "bytes": result.bytes,
                      "records": result.records}))
    return 0


if __name__ == "__main__":
    sys.exit(export_main())
