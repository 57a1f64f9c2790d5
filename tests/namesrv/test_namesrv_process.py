"""``rmq-namesrv`` as a real subprocess: raw JSON requests, garbage from other peers, SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.remoting.frame import FrameDecoder
from tests.procs import Proc, start_namesrv


def raw_frame(header: dict[str, object], body: bytes = b"") -> bytes:
    h = json.dumps(header).encode()
    return struct.pack(">II", 4 + len(h) + len(body), len(h)) + h + body


def connect(addr: str) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    return sock


def read_responses(sock: socket.socket, count: int) -> list[object]:
    decoder = FrameDecoder()
    out: list[object] = []
    while len(out) < count:
        data = sock.recv(65536)
        if not data:
            break
        out += decoder.feed(data)
    return out


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[Proc]:
    proc = start_namesrv(kv_dir=tmp_path)
    yield proc
    proc.kill()


def route_request(opaque: int, topic: str) -> bytes:
    # Exactly as a Java 4.9.4 client writes it.
    return raw_frame({"code": 105, "extFields": {"topic": topic}, "flag": 0, "language": "JAVA",
                      "opaque": opaque, "serializeTypeCurrentRPC": "JSON", "version": 401})


def test_unknown_topic_answers_17_with_rocketmq_remark(namesrv: Proc) -> None:
    with connect(namesrv.addr) as sock:
        sock.sendall(route_request(0, "NoSuchTopic"))
        [resp] = read_responses(sock, 1)
    assert resp.code == 17  # type: ignore[attr-defined]
    assert resp.opaque == 0  # type: ignore[attr-defined]
    assert resp.is_response  # type: ignore[attr-defined]
    assert resp.remark == "No topic route info in name server for the topic: NoSuchTopic"  # type: ignore[attr-defined]


def test_survives_garbage_and_half_frames_from_other_connections(namesrv: Proc) -> None:
    garbage = connect(namesrv.addr)
    garbage.sendall(b"\x00\x00\x00\x10\x07garbage-garbage!")
    half = connect(namesrv.addr)
    half.sendall(route_request(1, "T")[:20])
    huge = connect(namesrv.addr)
    huge.sendall(struct.pack(">II", 0x7FFFFFFF, 5))
    with connect(namesrv.addr) as sock:
        sock.sendall(route_request(2, "Other"))
        [resp] = read_responses(sock, 1)
        assert resp.code == 17  # type: ignore[attr-defined]
    half.close()  # disconnect mid-frame
    [answer] = read_responses(garbage, 1)
    assert answer.code == 1 and "protocol error" in answer.remark  # type: ignore[attr-defined]
    assert garbage.recv(10) == b""  # then closed
    [answer] = read_responses(huge, 1)
    assert "exceeds the maximum" in answer.remark  # type: ignore[attr-defined]
    for s in (garbage, huge):
        s.close()
    with connect(namesrv.addr) as sock:
        sock.sendall(route_request(3, "Still"))
        [resp] = read_responses(sock, 1)
        assert resp.code == 17  # type: ignore[attr-defined]
    assert namesrv.popen.poll() is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stops_cleanly_on_signal(tmp_path: Path, sig: int) -> None:
    proc = start_namesrv(kv_dir=tmp_path)
    proc.signal(sig)
    assert proc.popen.wait(10) == 0
    assert "server_stopped" in proc.stderr_text()
    assert sum(line.startswith("NAMESRV READY") for line in proc.lines) == 1


def test_print_config_and_unknown_key(tmp_path: Path) -> None:
    conf = tmp_path / "ns.properties"
    conf.write_text("listenPort=19876\nscanNotActiveBrokerInterval=5000\n")
    out = subprocess.run([sys.executable, "-m", "pocketmq.namesrv.main", "-c", str(conf), "--print-config"],
                         capture_output=True, text=True, timeout=30, check=True)
    assert "listenPort=19876" in out.stdout and "scanNotActiveBrokerInterval=5000" in out.stdout
    conf.write_text("listenPrt=1\n")
    bad = subprocess.run([sys.executable, "-m", "pocketmq.namesrv.main", "-c", str(conf)],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "unknown config key 'listenPrt'" in bad.stderr
