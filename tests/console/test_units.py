"""Pure parts of the console: users file and password hashes, sessions and login throttling, proxy-address
parsing, configuration, list selection and paging, group lag from broker tables, body rendering, cursors, CSV."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.admin.api import queue_lag
from pocketmq.common.topic_config import TopicConfig
from pocketmq.console import main as console_main
from pocketmq.console import messages as msgs
from pocketmq.console.config import ConsoleConfig, describe, normalise_base_path
from pocketmq.console.pages_groups import version_text
from pocketmq.console.security import LoginThrottle, SessionStore, _client_ip
from pocketmq.console.users import UsersFile, UsersFileError, add_user, hash_password, parse_users, verify_password
from pocketmq.console.view import GROUP_SORTS, TOPIC_SORTS, MasterGroups, build_groups, build_topics, paginate, select


def test_password_hashes_verify_and_refuse() -> None:
    stored = hash_password("s3cret")
    assert stored.startswith("scrypt$16384$8$1$") and verify_password("s3cret", stored)
    assert not verify_password("s3cret!", stored)
    assert hash_password("s3cret") != stored  # a fresh salt each time
    for broken in ("", "scrypt$1$8$1$AA$AA", "scrypt$16384$8$1$!!$AA", "plain", "scrypt$1048576$8$1$AA$AA"):
        assert not verify_password("s3cret", broken)
    with pytest.raises(UsersFileError):
        hash_password("")


def test_users_file_add_replace_parse_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "users"
    assert add_user(path, "alice", "admin", "pw-one")
    assert add_user(path, "bob", "viewer", "pw-two")
    assert not add_user(path, "alice", "viewer", "pw-three")  # replaced, not added
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    users = UsersFile(path)
    assert users.authenticate("alice", "pw-three") is not None and users.load()["alice"].role == "viewer"
    assert users.authenticate("alice", "pw-one") is None and users.authenticate("nobody", "x") is None
    for bad, why in (("alice:root:scrypt$x", "role"), ("alice:admin", "want name:role:hash"),
                     ("a b:admin:scrypt$x", "user name"), ("alice:admin:md5$x", "not an scrypt hash")):
        with pytest.raises(UsersFileError, match=why):
            parse_users(bad)
    with pytest.raises(UsersFileError):
        add_user(path, "x:y", "admin", "pw")


def test_adduser_command_reads_the_password_from_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("from-stdin-pw\n"))
    path = tmp_path / "users"
    assert console_main.main(["adduser", "--users-file", str(path), "carol", "--role", "admin",
                              "--password-stdin"]) == 0
    assert "added carol (admin)" in capsys.readouterr().out
    assert UsersFile(path).authenticate("carol", "from-stdin-pw") is not None
    assert "from-stdin-pw" not in path.read_text()


def test_console_refuses_to_start_without_users_and_prints_config_masked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POCKETMQ_ACCESS_KEY", "ak1")
    monkeypatch.setenv("POCKETMQ_SECRET_KEY", "very-secret-value")
    assert console_main.main(["--print-config", "--port", "0"]) == 0
    out = capsys.readouterr().out
    assert "accessKey=ak1" in out and "secretKey=******" in out and "very-secret-value" not in out
    # a real process: the server run enables faulthandler, which needs a real stderr
    refused = subprocess.run([sys.executable, "-m", "pocketmq.console.main", "--port", "0", "-n", "127.0.0.1:1"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2 and "no users file" in refused.stderr
    props = tmp_path / "console.properties"
    props.write_text("listenPort=0\nnoSuchKey=1\n")
    assert console_main.main(["-c", str(props)]) == 2
    assert "unknown config key 'noSuchKey'" in capsys.readouterr().err


def test_config_checks() -> None:
    assert normalise_base_path("console/") == "/console" and normalise_base_path("/") == ""
    assert ConsoleConfig(base_path="/a/b/").base_path == "/a/b"
    for bad in ("/a/../b", "/a b", "/<x>"):
        with pytest.raises(ValueError):
            normalise_base_path(bad)
    with pytest.raises(ValueError, match="go together"):
        ConsoleConfig(access_key="ak")
    assert "s3" not in describe(ConsoleConfig(access_key="ak", secret_key="s3"))


def test_sessions_expire_when_idle_or_old_and_are_bounded() -> None:
    now = [1000.0]
    store = SessionStore(idle_timeout=60, max_age=300, max_sessions=3, clock=lambda: now[0])
    token, session = store.create("alice", "admin")
    assert store.get(token) is session and session.is_admin
    now[0] += 59
    assert store.get(token) is session  # used: the idle clock restarts
    now[0] += 59
    assert store.get(token) is session
    now[0] += 61
    assert store.get(token) is None
    token, _ = store.create("bob", "viewer")
    for _ in range(4):
        now[0] += 50
        assert store.get(token) is not None
    now[0] += 120  # past max age though used every 50 s
    assert store.get(token) is None
    tokens = [store.create(f"u{i}", "viewer")[0] for i in range(5)]
    assert len(store) == 3 and store.get(tokens[0]) is None and store.get(tokens[-1]) is not None
    assert store.get(None) is None and store.get("forged") is None


def test_login_throttle_window() -> None:
    now = [0.0]
    throttle = LoginThrottle(clock=lambda: now[0])
    for _ in range(10):
        assert not throttle.blocked("1.2.3.4")
        throttle.failed("1.2.3.4")
    assert throttle.blocked("1.2.3.4") and not throttle.blocked("5.6.7.8")
    now[0] += 301
    assert not throttle.blocked("1.2.3.4")


def test_forwarded_for_takes_the_nearest_untrusted_hop() -> None:
    trusted = frozenset({"127.0.0.1", "10.0.0.5"})
    assert _client_ip("203.0.113.9", trusted) == "203.0.113.9"
    assert _client_ip("6.6.6.6, 203.0.113.9, 10.0.0.5", trusted) == "203.0.113.9"  # 6.6.6.6 was the client's claim
    assert _client_ip("not-an-ip", trusted) is None and _client_ip(None, trusted) is None


def test_lag_definition() -> None:
    assert queue_lag(10, 4) == 6 and queue_lag(10, 10) == 0
    assert queue_lag(10, 12) == 0  # a committed offset past the end (a truncated queue) is no negative lag
    assert queue_lag(10, -1) == 10  # RocketMQ's "no offset": counted from 0, never 11 or -1


def _tables() -> dict[str, MasterGroups]:
    def entry(topic: str, q: int, broker_offset: int, consumer_offset: int) -> dict[str, object]:
        return {"topic": topic, "brokerName": "b", "queueId": q, "brokerOffset": broker_offset,
                "consumerOffset": consumer_offset, "lag": queue_lag(broker_offset, consumer_offset)}

    a = MasterGroups(groups={"G1": {"groupName": "G1", "consumeBroadcastEnable": False}},
                     stats={"G1": {"consumeTps": 1.5, "offsetTable": [entry("T1", 0, 10, 4), entry("T1", 1, 5, 9),
                                                                       entry("%RETRY%G1", 0, 3, 1)]}})
    b = MasterGroups(groups={"G2": {"groupName": "G2"}},
                     stats={"G1": {"consumeTps": 0.5, "offsetTable": [entry("T1", 0, 7, 7)]}})
    return {"broker-a": a, "broker-b": b}


TOPIC_TABLES = {"broker-a": {"T1": TopicConfig("T1", 4, 4, 6), "%RETRY%G1": TopicConfig("%RETRY%G1", 1, 1, 6)},
                "broker-b": {"T1": TopicConfig("T1", 8, 8, 4, order=True)}}


def test_group_and_topic_rows_from_broker_tables() -> None:
    groups = {g.name: g for g in build_groups(_tables())}
    assert groups["G1"].lag == 6 and groups["G1"].retry_lag == 2 and groups["G1"].consume_tps == 2.0
    assert groups["G1"].brokers == ("broker-a", "broker-b") and groups["G1"].topics == ("T1",)
    assert groups["G2"].lag == 0 and groups["G2"].configured
    topics = {t.name: t for t in build_topics(["T1", "OnlyInNamesrv", "TBW102"], TOPIC_TABLES, frozenset())}
    assert topics["T1"].write_queues == 8 and topics["T1"].order and topics["T1"].brokers == ("broker-a", "broker-b")
    assert topics["%RETRY%G1"].kind == "retry" and topics["TBW102"].kind == "system"
    assert topics["OnlyInNamesrv"].brokers == ()


def test_select_sort_and_paginate() -> None:
    rows = build_topics([f"Topic{i:04d}" for i in range(120)], {}, frozenset())
    chosen = select(rows, query="topic00", kinds=frozenset({"normal"}), sort="name", descending=True,
                    sorts=TOPIC_SORTS)
    assert len(chosen) == 100 and chosen[0].name == "Topic0099"
    page = paginate(chosen, 3, 40, len(rows))
    assert page.number == 3 and page.pages == 3 and len(page.rows) == 20 and page.matched == 100
    assert paginate(chosen, 99, 40, len(rows)).number == 3 and paginate([], 1, 40, 0).pages == 1
    groups = select(build_groups(_tables()), query="", kinds=frozenset({"normal"}), sort="lag", descending=True,
                    sorts=GROUP_SORTS)
    assert [g.name for g in groups] == ["G1", "G2"]


def test_bodies_are_cut_safely_and_shown_four_ways() -> None:
    body = ("é" * 10).encode()  # two bytes each
    view = msgs.render_body(body, "text", 5)
    assert view.cut and view.text == "éé"  # never half a character
    assert msgs.render_body(b'{"a":[1,2]}', "json", 100).text == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert msgs.render_body(b"not json", "json", 100).note == "not JSON: shown as text"
    assert msgs.render_body(b"\x00\x01AB", "hex", 100).text.startswith("00000000  00 01 41 42")
    big = bytes(range(256)) * 10
    shown = msgs.render_body(big, "base64", 400)
    assert shown.cut and base64.b64decode(shown.text) == big[:300]
    assert msgs.render_body(b"x", "evil", 10).mode == "text"


def test_cursor_round_trip_and_refusals() -> None:
    cursor = msgs.Cursor("T", (msgs.QueueSpan("broker-a", 0, 5, 10), msgs.QueueSpan("broker-b", 3, 0, 2)))
    assert msgs.Cursor.decode(cursor.encode()) == cursor
    for bad in ("", "!!!", base64.urlsafe_b64encode(b'["T",[["b",0,9,2]]]').decode(), "x" * 70_000,
                base64.urlsafe_b64encode(b'{"a":1}').decode()):
        with pytest.raises(msgs.CursorError):
            msgs.Cursor.decode(bad)


def test_csv_cells_cannot_become_formulas() -> None:
    text = msgs.csv_text([[msgs._cell("=HYPERLINK(1)"), msgs._cell("+1"), msgs._cell("ok")]], header=True)
    assert text.splitlines()[0].startswith("msgId,") and "'=HYPERLINK(1),'+1,ok" in text


def test_client_versions_are_readable() -> None:
    assert version_text(401) == "V4_9_4 (401)" and version_text("77") == "77" and version_text("x") == "x"
