"""The replication wire protocol on byte literals: encoders, decoders fed at every split position, and
bad input raising named errors."""

from __future__ import annotations

import pytest

from pocketmq.ha.errors import (
    InvalidOffsetReportError,
    MalformedTransferError,
    ReadBufferFullError,
    TransferGapError,
    TransferTooLargeError,
)
from pocketmq.ha.wire import (
    OffsetReportDecoder,
    Transfer,
    TransferDecoder,
    encode_offset_report,
    encode_transfer_header,
)

# offset 0x0102030405060708 and 0x10000 (65536)
REPORT_A = b"\x01\x02\x03\x04\x05\x06\x07\x08"
REPORT_B = b"\x00\x00\x00\x00\x00\x01\x00\x00"
# transfer of b"abc" at 65536, then a heartbeat at 65539
TRANSFER = b"\x00\x00\x00\x00\x00\x01\x00\x00" b"\x00\x00\x00\x03" b"abc"
HEARTBEAT = b"\x00\x00\x00\x00\x00\x01\x00\x03" b"\x00\x00\x00\x00"


def test_encoders_give_the_documented_bytes() -> None:
    assert encode_offset_report(0x0102030405060708) == REPORT_A
    assert encode_offset_report(65536) == REPORT_B
    assert encode_transfer_header(65536, 3) + b"abc" == TRANSFER
    assert encode_transfer_header(65539, 0) == HEARTBEAT


@pytest.mark.parametrize(("offset", "size"), [(-1, 0), (0, -1), (1 << 63, 0), (0, 1 << 31)])
def test_transfer_header_encoder_rejects_out_of_range(offset: int, size: int) -> None:
    with pytest.raises(ValueError):
        encode_transfer_header(offset, size)


def test_offset_report_encoder_rejects_negative() -> None:
    with pytest.raises(ValueError):
        encode_offset_report(-5)


# ------------------------------------------------------------------------------ offset reports

def test_report_decoder_returns_the_last_complete_word() -> None:
    decoder = OffsetReportDecoder()
    assert decoder.feed(REPORT_A + REPORT_B) == 65536
    assert decoder.buffered == 0


@pytest.mark.parametrize("split", range(17))
def test_report_decoder_at_every_split(split: int) -> None:
    stream = REPORT_A + REPORT_B
    decoder = OffsetReportDecoder()
    first = decoder.feed(stream[:split])
    second = decoder.feed(stream[split:])
    expected_first = None if split < 8 else (0x0102030405060708 if split < 16 else 65536)
    assert first == expected_first
    assert second == (65536 if split < 16 else None)
    assert decoder.buffered == 0


def test_report_decoder_byte_by_byte_and_carry() -> None:
    decoder = OffsetReportDecoder()
    results = [decoder.feed(bytes([b])) for b in REPORT_A + REPORT_B[:3]]
    assert results[:7] == [None] * 7
    assert results[7] == 0x0102030405060708
    assert results[8:] == [None] * 3
    assert decoder.buffered == 3
    assert decoder.feed(REPORT_B[3:] + REPORT_A[:2]) == 65536
    assert decoder.buffered == 2


def test_report_decoder_words_are_aligned_on_the_stream() -> None:
    # 5 bytes then 7: the last complete word is bytes 0..7 of the stream, not the last 8 bytes fed.
    decoder = OffsetReportDecoder()
    assert decoder.feed(REPORT_B[:5]) is None
    assert decoder.feed(REPORT_B[5:] + b"\xff\xff\xff\xff") == 65536
    assert decoder.buffered == 4


def test_negative_report_is_a_named_error() -> None:
    decoder = OffsetReportDecoder()
    with pytest.raises(InvalidOffsetReportError) as info:
        decoder.feed(b"\xff" * 8)
    assert info.value.offset == -1


# ---------------------------------------------------------------------------------- transfers

def _drain(decoder: TransferDecoder) -> list[tuple[int, bytes]]:
    out = []
    while (transfer := decoder.next_transfer()) is not None:
        out.append((transfer.from_offset, bytes(transfer.body)))
    return out


def test_transfer_decoder_decodes_data_and_heartbeat() -> None:
    decoder = TransferDecoder(1024)
    decoder.feed(TRANSFER + HEARTBEAT)
    first = decoder.next_transfer()
    assert isinstance(first, Transfer)
    assert (first.from_offset, bytes(first.body), first.size, first.end_offset) == (65536, b"abc", 3, 65539)
    assert not first.is_heartbeat
    second = decoder.next_transfer()
    assert second is not None and second.is_heartbeat and second.from_offset == 65539
    assert decoder.next_transfer() is None
    assert decoder.expected_offset == 65539
    assert decoder.buffered == 0


@pytest.mark.parametrize("split", range(len(TRANSFER + HEARTBEAT) + 1))
def test_transfer_decoder_at_every_split(split: int) -> None:
    stream = TRANSFER + HEARTBEAT
    decoder = TransferDecoder(64)
    decoder.feed(stream[:split])
    got = _drain(decoder)
    decoder.feed(stream[split:])
    got += _drain(decoder)
    assert got == [(65536, b"abc"), (65539, b"")]


def test_transfer_decoder_through_get_buffer_with_compaction() -> None:
    # a buffer of 40 bytes forces compaction: each transfer is 12 + 10 bytes
    decoder = TransferDecoder(40)
    stream = b"".join(encode_transfer_header(i * 10, 10) + bytes([i]) * 10 for i in range(20))
    got: list[tuple[int, bytes]] = []
    pos = 0
    while pos < len(stream):
        room = decoder.get_buffer()
        n = min(len(room), 7, len(stream) - pos)
        room[:n] = stream[pos:pos + n]
        decoder.buffer_updated(n)
        pos += n
        got += _drain(decoder)
    assert got == [(i * 10, bytes([i]) * 10) for i in range(20)]


def test_transfer_body_is_a_view_of_the_read_buffer() -> None:
    decoder = TransferDecoder(1024)
    decoder.feed(TRANSFER)
    transfer = decoder.next_transfer()
    assert transfer is not None
    assert isinstance(transfer.body, memoryview) and transfer.body.obj is decoder._buf


@pytest.mark.parametrize("header", [
    encode_transfer_header(0, 0)[:8] + b"\xff\xff\xff\xff",  # size -1
    b"\x80" + bytes(7) + b"\x00\x00\x00\x01",  # offset < 0
])
def test_malformed_header_is_a_named_error(header: bytes) -> None:
    decoder = TransferDecoder(1024)
    decoder.feed(header)
    with pytest.raises(MalformedTransferError):
        decoder.next_transfer()


def test_oversized_transfer_is_refused_from_its_header() -> None:
    decoder = TransferDecoder(100)
    decoder.feed(encode_transfer_header(0, 89))  # 12 + 89 > 100
    with pytest.raises(TransferTooLargeError) as info:
        decoder.next_transfer()
    assert (info.value.size, info.value.limit) == (89, 88)


def test_largest_transfer_fits_exactly() -> None:
    decoder = TransferDecoder(100)
    decoder.feed(encode_transfer_header(0, 88) + bytes(88))
    transfer = decoder.next_transfer()
    assert transfer is not None and transfer.size == 88


def test_discontinuous_transfers_are_a_named_error() -> None:
    decoder = TransferDecoder(1024)
    decoder.feed(TRANSFER + encode_transfer_header(65540, 0))
    assert decoder.next_transfer() is not None
    with pytest.raises(TransferGapError) as info:
        decoder.next_transfer()
    assert (info.value.expected, info.value.got) == (65539, 65540)


def test_feeding_past_the_bound_is_a_named_error() -> None:
    decoder = TransferDecoder(32)
    decoder.feed(bytes(20))
    with pytest.raises(ReadBufferFullError):
        decoder.feed(bytes(13))
    with pytest.raises(ReadBufferFullError):
        decoder.buffer_updated(13)


def test_garbage_is_refused() -> None:
    # random-looking bytes: a huge size in the header
    decoder = TransferDecoder()
    decoder.feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    with pytest.raises((TransferTooLargeError, MalformedTransferError)):
        decoder.next_transfer()


def test_decoder_needs_room_for_a_header() -> None:
    with pytest.raises(ValueError):
        TransferDecoder(12)
