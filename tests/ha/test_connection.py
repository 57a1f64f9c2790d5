"""One master connection on its narrow interfaces alone: a fake replica hub and a read-only commit-log view,
no service and no store. What it tells the hub, what it sends, and that it closes once, whichever side
ends it first."""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.ha.connection import HAConnection
from pocketmq.ha.wire import TransferDecoder, encode_offset_report
from tests.ha.support import FakeTransport, ha_config
from tests.helpers import eventually

FILE = 4096


class FakeHub:
    """Records what a connection asks of its hub."""

    def __init__(self, *, accept: bool = True) -> None:
        self.accept = accept
        self.registered: list[HAConnection] = []
        self.forgotten: list[HAConnection] = []
        self.acks: list[int] = []

    def register(self, connection: HAConnection) -> bool:
        self.registered.append(connection)
        return self.accept

    def forget(self, connection: HAConnection) -> None:
        self.forgotten.append(connection)

    def acknowledged(self, offset: int) -> None:
        self.acks.append(offset)

    #: the 4.x protocol (controller mode's handshake is tested in tests/ha/test_epochs.py)
    handshake_required = False

    def handshake_reply(self) -> bytes:
        raise AssertionError("no handshake in the 4.x protocol")


@dataclass(frozen=True)
class Geometry:
    mapped_file_size_commit_log: int = FILE


class FakeLog:
    """A commit log holding ``data`` from offset 0, in files of :data:`FILE` bytes."""

    def __init__(self, data: bytes) -> None:
        self.config = Geometry()
        self.data = data
        self.min_phy_offset = 0
        self.recovered_max: int | None = None

    @property
    def max_phy_offset(self) -> int:
        return len(self.data)

    def get_commit_log_data(self, offset: int, max_bytes: int | None = None) -> memoryview | None:
        if not self.min_phy_offset <= offset < len(self.data):
            return None
        end = min(len(self.data), offset - offset % FILE + FILE, offset + (max_bytes or len(self.data)))
        return memoryview(self.data[offset:end])


def attached(data: bytes, hub: FakeHub, report: int = 0) -> tuple[HAConnection, FakeTransport]:
    connection = HAConnection(hub, FakeLog(data), ha_config(ha_transfer_batch_size=1000))
    transport = FakeTransport()
    connection.connection_made(transport)
    connection.data_received(encode_offset_report(report))
    return connection, transport


def received(transport: FakeTransport) -> list[tuple[int, bytes]]:
    decoder = TransferDecoder()
    out = []
    for chunk in transport.writes:
        decoder.feed(chunk)
        while (transfer := decoder.next_transfer()) is not None:
            out.append((transfer.from_offset, bytes(transfer.body)))
    return out


async def test_streams_from_the_last_file_and_reports_valid_acknowledgements() -> None:
    data = bytes(range(256)) * 40  # 10,240 bytes: files at 0, 4096, 8192
    hub = FakeHub()
    connection, transport = attached(data, hub)
    assert hub.registered == [connection] and hub.acks == [0]
    await eventually(lambda: connection.write_service.sent_offset == len(data), message="sent")
    transfers = received(transport)
    assert transfers[0][0] == 2 * FILE
    assert all(len(body) <= 1000 and offset // FILE == (offset + len(body) - 1) // FILE for offset, body in transfers)
    assert b"".join(body for _offset, body in transfers) == data[2 * FILE:]
    connection.data_received(encode_offset_report(len(data)))
    assert hub.acks == [0, len(data)] and connection.ack_offset == len(data)
    assert not hub.forgotten
    await connection.shutdown()


async def test_closes_once_whichever_side_ends_it_first() -> None:
    hub = FakeHub()
    connection, transport = attached(b"x" * 3000, hub, report=1000)
    await eventually(lambda: connection.write_service.sent_offset == 3000, message="sent")
    connection.data_received(encode_offset_report(2000))
    connection.data_received(encode_offset_report(1500))  # backwards: the read side closes it
    assert connection.closed and transport.aborted and hub.forgotten == [connection]
    assert hub.acks == [1000, 2000], "the rule-breaking report reached the hub"
    connection.connection_lost(ConnectionResetError())  # the socket side, after
    connection.close("again")
    await eventually(lambda: not connection.write_service.running, message="sender stopped by itself")
    assert hub.forgotten == [connection]


async def test_socket_lost_first_stops_the_sender() -> None:
    hub = FakeHub()
    connection, _transport = attached(b"x" * 100, hub, report=100)
    connection.connection_lost(None)
    assert hub.forgotten == [connection] and not connection.is_attached
    await eventually(lambda: not connection.write_service.running, message="sender stopped by itself")
    assert hub.forgotten == [connection]


async def test_a_refused_connection_is_closed_before_sending() -> None:
    hub = FakeHub(accept=False)
    connection = HAConnection(hub, FakeLog(b"x" * 100), ha_config())
    transport = FakeTransport()
    connection.connection_made(transport)
    assert connection.closed and transport.aborted and hub.forgotten == [connection]
    connection.data_received(encode_offset_report(0))
    assert not hub.acks and not transport.writes and not connection.write_service.running


async def test_slave_ahead_of_an_abnormally_restarted_master_is_sent_from_its_recovered_max() -> None:
    hub = FakeHub()
    log = FakeLog(b"x" * 1000)  # the master lost what it had past 600, then wrote 400 new bytes
    log.recovered_max = 600
    connection = HAConnection(hub, log, ha_config(ha_transfer_batch_size=1000))
    transport = FakeTransport()
    connection.connection_made(transport)
    connection.data_received(encode_offset_report(900))  # what the slave had before the master's power loss
    assert connection.read_service.request_offset == connection.ack_offset == 600 and hub.acks == [600]
    await eventually(lambda: connection.write_service.sent_offset == 1000, message="sent")
    assert received(transport) == [(600, b"x" * 400)]
    connection.data_received(encode_offset_report(900))  # sent before the slave saw the rewind: ignored
    assert not connection.closed and hub.acks == [600]
    connection.data_received(encode_offset_report(1000))  # the slave cut back to 600 and appended
    assert hub.acks == [600, 1000] and not connection.closed
    await connection.shutdown()


async def test_rewind_with_nothing_new_is_announced_at_once() -> None:
    hub = FakeHub()
    log = FakeLog(b"x" * 600)
    log.recovered_max = 600
    connection = HAConnection(hub, log, ha_config())  # heartbeat every 5 s
    transport = FakeTransport()
    connection.connection_made(transport)
    connection.data_received(encode_offset_report(900))
    await eventually(lambda: received(transport) == [(600, b"")], timeout=1.0, message="heartbeat header")
    await connection.shutdown()


async def test_clean_master_still_closes_on_a_report_past_its_max() -> None:
    hub = FakeHub()
    connection, transport = attached(b"x" * 600, hub, report=900)
    assert connection.closed and transport.aborted and not hub.acks
