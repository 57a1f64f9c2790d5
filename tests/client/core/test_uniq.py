"""UNIQ_KEY layout, uniqueness, counter, month rollover; client ids."""

from __future__ import annotations

import os
from datetime import datetime

from pocketmq.client.core.uniq import UniqIdGenerator, client_id, local_ip, next_uniq_id


class FakeClock:
    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now


def _ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    """Epoch ms of a local-time moment (the month start is local, as in RocketMQ)."""
    return int(datetime(year, month, day, hour, minute, second).timestamp() * 1000)


def test_layout_for_ipv4() -> None:
    clock = FakeClock(_ms(2024, 3, 1) + 0x01020304)
    gen = UniqIdGenerator(ip="192.168.1.2", pid=0x12345, process_int=0xDEADBEEF, clock=clock, counter_start=7)
    uniq = gen.next_id()
    assert len(uniq) == 32 and uniq == uniq.upper()
    assert uniq[:8] == "C0A80102"  # IP
    assert uniq[8:12] == "2345"  # pid, low 16 bits
    assert uniq[12:20] == "DEADBEEF"  # per-process int
    assert uniq[20:28] == "01020304"  # ms since the month began
    assert uniq[28:] == "0007"  # counter
    assert gen.prefix == uniq[:20]


def test_layout_for_ipv6() -> None:
    gen = UniqIdGenerator(ip="fd00::1", pid=1, process_int=2, clock=FakeClock(_ms(2024, 3, 1)))
    uniq = gen.next_id()
    assert len(uniq) == 56
    assert uniq.startswith("FD000000000000000000000000000001" + "0001" + "00000002")


def test_ids_are_unique_and_counter_is_monotonic() -> None:
    gen = UniqIdGenerator(ip="10.0.0.1", pid=1, process_int=1, clock=FakeClock(_ms(2024, 5, 10)))
    ids = [gen.next_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    counters = [int(i[28:], 16) for i in ids]
    assert counters == list(range(10_000))


def test_counter_wraps_at_16_bits() -> None:
    clock = FakeClock(_ms(2024, 5, 10))
    gen = UniqIdGenerator(ip="10.0.0.1", pid=1, process_int=1, clock=clock, counter_start=0xFFFF)
    assert [gen.next_id()[28:] for _ in range(3)] == ["FFFF", "0000", "0001"]


def test_month_rollover() -> None:
    clock = FakeClock(_ms(2024, 12, 31, 23, 59, 59))
    gen = UniqIdGenerator(ip="10.0.0.1", pid=1, process_int=1, clock=clock)
    late = int(gen.next_id()[20:28], 16)
    assert late == _ms(2024, 12, 31, 23, 59, 59) - _ms(2024, 12, 1)
    clock.now = _ms(2025, 1, 1) + 5
    assert int(gen.next_id()[20:28], 16) == 5
    clock.now = _ms(2024, 12, 15)  # a clock stepping back recomputes too
    assert int(gen.next_id()[20:28], 16) == _ms(2024, 12, 15) - _ms(2024, 12, 1)


def test_ms_in_a_long_month_fit_32_bits_unsigned() -> None:
    clock = FakeClock(_ms(2024, 1, 31, 23, 59, 59))
    gen = UniqIdGenerator(ip="10.0.0.1", pid=1, process_int=1, clock=clock)
    assert int(gen.next_id()[20:28], 16) == _ms(2024, 1, 31, 23, 59, 59) - _ms(2024, 1, 1)  # > 2**31


def test_default_generator() -> None:
    first, second = next_uniq_id(), next_uniq_id()
    assert first != second and first[:20] == second[:20]
    assert len(first) in (32, 56)


def test_client_id() -> None:
    assert client_id(ip="10.0.0.5") == f"10.0.0.5@{os.getpid()}"
    assert client_id(ip="10.0.0.5", instance_name="inst") == "10.0.0.5@inst"
    assert client_id(ip="10.0.0.5", instance_name="inst", unit_name="u1") == "10.0.0.5@inst@u1"
    assert client_id().startswith(local_ip() + "@")


def test_ids_of_one_millisecond_share_the_time_and_a_new_millisecond_changes_it() -> None:
    clock = FakeClock(_ms(2024, 5, 10) + 100)
    gen = UniqIdGenerator(ip="10.0.0.1", pid=1, process_int=1, clock=clock, counter_start=0x00FE)
    first, second = gen.next_id(), gen.next_id()
    assert first[:28] == second[:28] and (first[28:], second[28:]) == ("00FE", "00FF")
    clock.now += 1
    third = gen.next_id()
    assert int(third[20:28], 16) == int(first[20:28], 16) + 1 and third[28:] == "0100"
