"""Raw peers on the replication sockets: a fake slave must not release producers with forged
acknowledgements, the master's stream obeys the protocol (chunks within one file, heartbeats), both ends
drop silent peers, and a slave refuses a transfer at the wrong offset."""

from __future__ import annotations

import asyncio
import itertools
import struct
from typing import Any

import pytest

import pocketmq.ha.client as ha_client
from pocketmq.ha import HAClient, HAService
from pocketmq.ha.connection import HAConnection
from pocketmq.ha.wire import TransferDecoder, encode_offset_report, encode_transfer_header
from pocketmq.store import MessageStore, PutMessageStatus
from tests.ha.support import CL_FILE, Cluster, FakeTransport, append_messages, commit_log_files
from tests.helpers import eventually
from tests.store.support import msg

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def read_some(reader: asyncio.StreamReader) -> bytes:
    """The next chunk from the master; its closing the connection is a failure, not an empty read to spin on."""
    chunk = await reader.read(65536)
    assert chunk, "the master closed the connection"
    return chunk


async def connect(service: HAService) -> Streams:
    return await asyncio.open_connection("127.0.0.1", service.port)


async def read_until_closed(reader: asyncio.StreamReader, timeout: float = 5.0) -> bytes:
    """Everything the master sends until it closes the connection (fails if it does not)."""
    data = bytearray()
    async with asyncio.timeout(timeout):
        while chunk := await reader.read(65536):
            data += chunk
    return bytes(data)


def put(store: MessageStore) -> int:
    result = store.append(msg(body=b"y" * 200))
    assert result.append_result is not None
    return result.append_result.end_offset


# ------------------------------------------------------------------------------ forged acknowledgements

async def test_first_report_beyond_max_is_disconnected(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    append_messages(master, 10)
    reader, writer = await connect(service)
    writer.write(encode_offset_report(master.max_phy_offset + 1))
    await read_until_closed(reader)
    writer.close()
    assert service.connection_count == 0 and service.push_to_slave_max_offset == -1


async def test_fake_ack_beyond_max_does_not_release_waiters(cluster: Cluster) -> None:
    master, service = await cluster.start_master(ha={"slave_timeout": 0.5})
    append_messages(master, 10)
    reader, writer = await connect(service)
    writer.write(encode_offset_report(0))  # looks like an empty slave
    await eventually(lambda: service.connection_count == 1, message="fake slave attached")
    waiter = service.wait_for_replica(put(master))
    assert not waiter.done()
    writer.write(encode_offset_report(master.max_phy_offset + 4096))
    await read_until_closed(reader)
    writer.close()
    assert not waiter.done(), "a forged acknowledgement released a producer"
    assert await waiter is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    assert service.connection_count == 0


async def test_acknowledgement_going_backwards_is_disconnected(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    append_messages(master, 10)
    reader, writer = await connect(service)
    writer.write(encode_offset_report(0))
    # read what the master sends, then acknowledge it, then go backwards
    decoder = TransferDecoder()
    received = 0
    async with asyncio.timeout(5):
        while received < master.max_phy_offset:
            decoder.feed(await read_some(reader))
            while (transfer := decoder.next_transfer()) is not None:
                received = transfer.end_offset
    writer.write(encode_offset_report(received))
    await eventually(lambda: service.push_to_slave_max_offset == received, message="valid ack counted")
    writer.write(encode_offset_report(received - 100))
    await read_until_closed(reader)
    writer.close()
    assert service.connection_count == 0


async def test_acknowledging_bytes_never_sent_is_disconnected(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    append_messages(master, 200)
    last_file = master.max_phy_offset - master.max_phy_offset % CL_FILE
    connection = HAConnection(service, master, service.config)
    transport = FakeTransport()
    connection.connection_made(transport)
    # first report 0: the master will start at its last file and has sent nothing yet
    connection.data_received(encode_offset_report(0))
    assert connection.write_service.sent_offset == last_file
    # a waiter for data already stored (a new put now could be sent at once, from within the put)
    waiter = service.wait_for_replica(master.max_phy_offset)
    assert not waiter.done()
    connection.data_received(encode_offset_report(last_file + 100))  # <= max, but never sent
    assert transport.aborted and connection.closed
    assert not waiter.done()
    assert service.push_to_slave_max_offset < last_file + 100
    connection.connection_lost(None)
    await eventually(lambda: connection not in service.connections, message="sender finished")


async def test_slave_whose_next_bytes_are_deleted_is_disconnected(cluster: Cluster) -> None:
    # a high-water mark of one byte: one transfer per write, and the fake transport pauses after it
    master, service = await cluster.start_master(file_reserved_time_hours=1e-9, ha={"write_buffer_high_water": 1})
    append_messages(master, 300)
    connection = HAConnection(service, master, service.config)
    transport = FakeTransport(connection)
    connection.connection_made(transport)
    connection.data_received(encode_offset_report(100))  # a slave far behind, in the first file
    await eventually(lambda: len(transport.writes) == 1, message="first transfer sent")
    await eventually(lambda: master.flushed_phy_offset == master.max_phy_offset, message="master flushed")
    assert master.retention is not None
    master.request_delete_expired_files()
    await master.retention.run_once()
    assert master.min_phy_offset > connection.write_service.sent_offset
    connection.resume_writing()
    await eventually(lambda: transport.aborted, message="connection closed")
    assert len(transport.writes) == 1
    connection.connection_lost(None)
    await eventually(lambda: connection not in service.connections, message="sender finished")


async def test_negative_report_is_disconnected(cluster: Cluster) -> None:
    _master, service = await cluster.start_master()
    reader, writer = await connect(service)
    writer.write(struct.pack(">q", -8))
    await read_until_closed(reader)
    writer.close()


# ------------------------------------------------------------------------------------ the stream

async def test_master_stream_chunks_within_files_then_heartbeats(cluster: Cluster) -> None:
    master, service = await cluster.start_master(ha={"ha_transfer_batch_size": 10_000,
                                                     "ha_send_heartbeat_interval": 0.2})
    append_messages(master, 300)
    start = 1000
    reader, writer = await connect(service)
    writer.write(encode_offset_report(start))
    decoder = TransferDecoder()
    body = bytearray()
    heartbeats = 0
    async with asyncio.timeout(10):
        while heartbeats < 2:
            decoder.feed(await read_some(reader))
            while (transfer := decoder.next_transfer()) is not None:
                if transfer.is_heartbeat:
                    assert transfer.from_offset == master.max_phy_offset
                    heartbeats += 1
                    continue
                assert transfer.from_offset == start + len(body)
                assert transfer.size <= 10_000
                assert transfer.from_offset // CL_FILE == (transfer.end_offset - 1) // CL_FILE, "crossed a file"
                body += transfer.body
                writer.write(encode_offset_report(transfer.end_offset))
    await eventually(lambda: service.push_to_slave_max_offset == master.max_phy_offset, message="acked")
    writer.close()
    files = await commit_log_files(master)
    whole = b"".join(files[name] for name in sorted(files))
    assert bytes(body) == whole[start:master.max_phy_offset]


async def test_a_large_put_is_sent_to_the_slave_from_within_the_put(cluster: Cluster) -> None:
    """A put that leaves at least a whole transfer unsent goes out before the put returns (the slave works
    on it while the master handles the rest of its read); smaller ones wait for the sender task, which
    coalesces the puts of one loop step."""
    master, service = await cluster.start_master(ha={"ha_transfer_batch_size": 4096})
    reader, writer = await connect(service)
    writer.write(encode_offset_report(0))
    await eventually(lambda: service.connection_count == 1, message="attached")
    (connection,) = service.attached_slaves
    sender = connection.write_service
    await eventually(lambda: sender.sent_offset == master.max_phy_offset, message="caught up")
    small = put(master)  # ~300 bytes: below one transfer
    assert sender.sent_offset < small
    await eventually(lambda: sender.sent_offset == small, message="the sender task sent the small put")
    large = append_messages(master, 20, size=1000)  # ~20 KB: several transfers, appended one by one
    assert sender.sent_offset >= large - 4096, "a whole transfer's worth waited for the sender task"
    await eventually(lambda: sender.sent_offset == large, message="the rest followed")
    writer.close()
    del reader


async def test_master_drops_a_silent_slave(cluster: Cluster) -> None:
    _master, service = await cluster.start_master(ha={"ha_housekeeping_interval": 0.3})
    reader, writer = await connect(service)
    writer.write(encode_offset_report(0))
    await eventually(lambda: service.connection_count == 1, message="attached")
    await read_until_closed(reader)
    writer.close()
    assert service.connection_count == 0


async def test_connections_are_bounded(cluster: Cluster) -> None:
    _master, service = await cluster.start_master(ha={"max_connections": 1})
    _r1, w1 = await connect(service)
    w1.write(encode_offset_report(0))
    await eventually(lambda: service.connection_count == 1, message="first attached")
    r2, w2 = await connect(service)
    await read_until_closed(r2)
    w2.close()
    w1.close()
    assert len(service.connections) <= 1


async def test_peers_that_leave_before_reporting_free_their_slot(cluster: Cluster) -> None:
    _master, service = await cluster.start_master(ha={"max_connections": 2})
    for _ in range(5):
        _reader, writer = await connect(service)
        await eventually(lambda: len(service.connections) == 1, message="accepted")
        writer.close()
        await eventually(lambda: not service.connections, message="sender task finished")
    _reader, writer = await connect(service)
    writer.write(encode_offset_report(0))
    await eventually(lambda: service.connection_count == 1, message="a slave still gets in")
    writer.close()


# ------------------------------------------------------------------------------- fake masters

class FakeMaster:
    """A server that records each connection's first report and answers with ``reply`` (only the first
    connection with ``first_only``: a real master answers later ones from the reported offset, and a transfer
    below the slave's end now makes a slave cut its log back); ``acks`` are the reports that follow on the same
    connection."""

    def __init__(self, reply: bytes, *, first_only: bool = False) -> None:
        self.reply = reply
        self.first_only = first_only
        self.reports: list[int] = []
        self.acks: list[int] = []
        self.server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        data = await reader.readexactly(8)
        self.reports.append(struct.unpack(">q", data)[0])
        if self.reply and not (self.first_only and len(self.reports) > 1):
            writer.write(self.reply)
        try:
            while True:
                self.acks.append(struct.unpack(">q", await reader.readexactly(8))[0])
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        writer.close()

    async def slave_of_it(self, cluster: Cluster, **overrides: Any) -> tuple[MessageStore, HAClient]:
        """A slave store and its HAClient pointed at this fake master (``start`` it first)."""
        assert self.server is not None
        slave = await cluster.start_slave()
        client = cluster.start_client(slave, None, **overrides)
        client.update_master_address(f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}")
        return slave, client

    async def stop(self) -> None:
        for writer in self._writers:
            writer.close()
        if self.server is not None:
            self.server.close()


async def test_slave_refuses_a_transfer_at_the_wrong_offset(cluster: Cluster) -> None:
    fake = FakeMaster(encode_transfer_header(100, 4) + b"abcd")  # neither its max offset nor a file start
    await fake.start()
    try:
        slave, _client = await fake.slave_of_it(cluster)
        await eventually(lambda: len(fake.reports) >= 2, message="slave reconnected")
        assert fake.reports[:2] == [0, 0]
        assert slave.max_phy_offset == 0
    finally:
        await fake.stop()


@pytest.mark.parametrize("every", [0, 256 * 1024])
async def test_slave_acknowledges_within_a_read(cluster: Cluster, monkeypatch: pytest.MonkeyPatch,
                                                 every: int) -> None:
    """Transfers arriving in one read are acknowledged as they are applied once ``_REPORT_EVERY`` bytes were
    appended since the last report, so that the master can answer SYNC_MASTER puts (and the slave's work
    overlaps the master's) before the whole read is applied; small ones together at the end of the read."""
    monkeypatch.setattr(ha_client, "_REPORT_EVERY", every)
    source, _service = await cluster.start_master()
    end = append_messages(source, 12, size=300)
    data = bytes(source.get_commit_log_data(0, end) or b"")
    assert len(data) == end
    cuts = [0, end // 3, 2 * end // 3, end]
    reply = b"".join(encode_transfer_header(a, b - a) + data[a:b] for a, b in itertools.pairwise(cuts))
    fake = FakeMaster(reply)  # the three transfers leave in one write
    await fake.start()
    try:
        slave, _client = await fake.slave_of_it(cluster)
        await eventually(lambda: slave.max_phy_offset == end, message="slave applied the transfers")
        await eventually(lambda: end in fake.acks, message="slave acknowledged the last transfer")
        acks = sorted({ack for ack in fake.acks if ack})
        if every == 0:
            assert acks == cuts[1:]
        else:  # one report per read (the three transfers come in one write, normally one read)
            assert set(acks) <= set(cuts[1:]) and acks[-1] == end
    finally:
        await fake.stop()


async def test_slave_cuts_replicated_bytes_that_are_not_records_and_asks_again(cluster: Cluster) -> None:
    """The acknowledgement comes before the check (RocketMQ's meaning: the bytes are in the commit log); bytes
    that fail the check are cut, and the next connection asks for what follows the last valid record."""
    source, _service = await cluster.start_master()
    end = append_messages(source, 6, size=300)
    data = bytes(source.get_commit_log_data(0, end) or b"")
    junk = struct.pack(">ii", 64, 0x12345678) + bytes(56)  # a whole "record" with a bad magic code
    fake = FakeMaster(encode_transfer_header(0, end + len(junk)) + data + junk, first_only=True)
    await fake.start()
    try:
        slave, _client = await fake.slave_of_it(cluster)
        await eventually(lambda: len(fake.reports) >= 2, message="slave reconnected")
        assert fake.reports[:2] == [0, end]
        assert slave.max_phy_offset == end
        indexed = sum(slave.get_max_offset_in_queue(topic, queue_id)
                      for topic in ("TopicA", "TopicB") for queue_id in range(4))
        assert indexed == 6
    finally:
        await fake.stop()


async def test_slave_drops_a_silent_master(cluster: Cluster) -> None:
    fake = FakeMaster(b"")
    await fake.start()
    try:
        _slave, client = await fake.slave_of_it(cluster, ha_housekeeping_interval=0.3)
        await eventually(lambda: client.connect_count >= 2, message="slave reconnected")
    finally:
        await fake.stop()


async def test_slave_refuses_garbage_from_the_master(cluster: Cluster) -> None:
    fake = FakeMaster(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    await fake.start()
    try:
        slave, _client = await fake.slave_of_it(cluster)
        await eventually(lambda: len(fake.reports) >= 2, message="slave reconnected")
        assert slave.max_phy_offset == 0
    finally:
        await fake.stop()
