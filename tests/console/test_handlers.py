"""The console's handlers over HTTP (no browser) against a real name server and broker in the test's loop:
login and sessions, CSRF and roles, the reverse-proxy headers and base path, the broker's refusal texts,
lag as defined, POP in flight and timers waiting, message paging with a cursor and partial answers, DLQ resend and
CSV, ACL signing with no secret shown or logged."""

from __future__ import annotations

import csv
import io
import re
import time
from pathlib import Path
from urllib.parse import unquote

import pytest

from pocketmq.admin import api_ops
from pocketmq.admin.api import AdminClient
from pocketmq.broker.controller import BrokerController
from pocketmq.client import Message, Producer
from pocketmq.common.topic import dlq_topic, retry_topic
from pocketmq.console import security
from pocketmq.namesrv.controller import NamesrvController
from tests.console.support import VIEWER, browser, console, text_of
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def broker_props() -> dict[str, str]:
    return {"traceTopicEnable": "true"}


async def _produce(ns: str, topic: str, count: int, *, keys: str | None = None) -> list[str]:
    async with Producer("ConsoleTestPG", namesrv_addr=ns, instance_name=f"ct-{time.monotonic_ns()}") as producer:
        return [(await producer.send(Message(topic, f"m{i}".encode(), keys=keys))).offset_msg_id
                for i in range(count)]


async def test_login_sessions_and_logout(tmp_path: Path, namesrv: NamesrvController,
                                         broker: BrokerController) -> None:
    async with console(tmp_path, namesrv.addr) as server, browser(server, login=None) as b:
        status, _text, r = await b.get("/topics?q=x", allow_redirects=False)
        assert status == 303 and unquote(r.headers["Location"]) == "/login?next=/topics?q=x"
        status, _text, r = await b.get("/group/lag?name=G", headers={"HX-Request": "true"}, allow_redirects=False)
        assert r.headers["HX-Redirect"] == "/login"
        status, text, _ = await b.get("/api/series")
        assert status == 401 and '"login":"/login' in text.replace(" ", "")
        assert await b.login("alice", "wrong") == 401
        assert await b.login("nobody", "x") == 401
        assert await b.login() == 303
        cookie = next(c for c in b.session.cookie_jar if c.key == security.SESSION_COOKIE)
        assert cookie["httponly"] and cookie["samesite"] == "Strict" and cookie["path"] == "/"
        status, text, _ = await b.get("/")
        assert status == 200 and "Brokers" in text and "alice" in text
        # the session expires when unused for sessionTimeoutSeconds: the next visit goes to the login page
        sessions = server.console.sessions if server.console else None
        assert sessions is not None
        now = time.monotonic()
        sessions.clock = lambda: now + server.config.session_timeout_seconds + 1
        status, _text, r = await b.get("/groups", allow_redirects=False)
        assert status == 303 and r.headers["Location"].startswith("/login")
        sessions.clock = time.monotonic
        assert await b.login() == 303
        status, _text, r = await b.post("/logout", {}, allow_redirects=False)
        assert status == 303 and r.headers["Location"] == "/login"
        status, _text, _ = await b.get("/", allow_redirects=False)
        assert status == 303


async def test_login_form_needs_its_csrf_cookie_and_failures_are_throttled(
        tmp_path: Path, namesrv: NamesrvController, broker: BrokerController) -> None:
    async with console(tmp_path, namesrv.addr) as server, browser(server, login=None) as b:
        status, _text, _ = await b.post("/login", {"username": "alice", "password": "alice-password-1",
                                                   "_login_csrf": "forged"}, csrf=False)
        assert status == 403
        # a second login page (another tab, a stray request the browser makes) keeps the first form valid
        _status, first, _ = await b.get("/login")
        await b.get("/login?next=/favicon.ico")
        token = re.search(r'name="_login_csrf" value="([^"]*)"', first)
        assert token is not None
        status, _text, _ = await b.post("/login", {"username": "alice", "password": "alice-password-1",
                                                   "_login_csrf": token.group(1)}, csrf=False, allow_redirects=False)
        assert status == 303
        await b.get("/")  # the session's CSRF token, for the logout form
        status, _text, _ = await b.post("/logout", {}, allow_redirects=False)
        assert status == 303
        for _ in range(security.MAX_FAILURES):
            assert await b.login("alice", "wrong") == 401
        assert await b.login() == 429  # even the right password waits now


async def test_csrf_origin_and_roles(tmp_path: Path, namesrv: NamesrvController, broker: BrokerController) -> None:
    async with console(tmp_path, namesrv.addr) as server:
        async with browser(server) as b:
            form = {"topic": "CsrfT", "read": "1", "write": "1", "perm": "6", "type": "NORMAL"}
            status, text, _ = await b.post("/topics/update", form, csrf=False)
            assert status == 403 and "CSRF" in text
            status, text, _ = await b.post("/topics/update", {**form, "_csrf": "not-the-token"}, csrf=False)
            assert status == 403
            status, text, _ = await b.post("/topics/update", form, headers={"Origin": "http://evil.example"})
            assert status == 403 and "Origin" in text
            status, text, _ = await b.post("/topics/update", form, headers={"HX-Request": "true"})
            assert status == 200 and "Topic CsrfT created" in text_of(text)
            assert "rmq-admin updateTopic -n " + namesrv.addr + " -t CsrfT -r 1 -w 1 -p 6" in text_of(text)
        async with browser(server, login=VIEWER) as v:
            status, text, _ = await v.get("/topics")
            assert status == 200 and "Viewers cannot change topics" in text
            status, text, _ = await v.post("/topics/update", {**form, "topic": "ViewerT"})
            assert status == 403 and "viewer" in text
            status, _text, _ = await v.post("/logout", {}, allow_redirects=False)
            assert status == 303  # a viewer may still log out


async def test_forms_show_the_brokers_refusal_and_the_broker_survives(
        tmp_path: Path, namesrv: NamesrvController, broker: BrokerController) -> None:
    async with console(tmp_path, namesrv.addr) as server, browser(server) as b:
        bad = {"read": "1", "write": "1", "perm": "6", "type": "NORMAL"}
        status, text, _ = await b.post("/topics/update", {**bad, "topic": "bad topic!"})
        assert status == 400
        assert "The specified topic[bad topic!] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$" \
            in text_of(text)
        status, text, _ = await b.post("/topics/update", {**bad, "topic": "T" * 128})
        assert "longer than topic max length 127" in text_of(text)
        status, text, _ = await b.post("/topics/update", {**bad, "topic": "TooManyQueues", "read": "5000"})
        assert status == 400 and "The broker refused" in text and "queue nums must be between 1 and 1024" in text
        status, text, _ = await b.post("/topics/update", {**bad, "topic": "OkT", "perm": "9"})
        assert status == 400 and "perm must be" in text
        status, text, _ = await b.get("/group?name=" + "x%20y")
        assert status == 400 and "The specified group[x y] contains illegal characters" in text_of(text)
        status, text, _ = await b.get("/messages?mode=range&go=1&topic=OkT&cursor=garbage")
        assert status == 400 and "not a cursor of this console" in text
        status, text, _ = await b.get("/messages?mode=id&go=1&id=zz")
        assert status == 400
        status, text, _ = await b.post("/topic/send", {"topic": "OkT", "body": "x" * (64 * 1024 + 1)})
        assert status == 400
        # after all that the broker still answers and the cluster page shows it
        status, text, _ = await b.get("/")
        assert status == 200 and broker.addr in text and "SYNC_MASTER" not in text_of(text).split("Brokers")[0]
        async with AdminClient([namesrv.addr]) as admin:
            assert (await admin.runtime_info(broker.addr))["brokerRole"]


async def test_reverse_proxy_headers_and_base_path(tmp_path: Path, namesrv: NamesrvController,
                                                   broker: BrokerController) -> None:
    proxy = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "mq.example.com", "X-Forwarded-Prefix": "/ops",
             "X-Forwarded-For": "203.0.113.9"}
    async with console(tmp_path, namesrv.addr, base_path="/console") as server, browser(server, login=None) as b:
        assert server.url.endswith("/console/")
        status, _text, r = await b.get("/topics", headers=proxy, allow_redirects=False)
        assert status == 303 and unquote(r.headers["Location"]) == "/ops/console/login?next=/ops/console/topics"
        status, text, r = await b.get("/login", headers=proxy)
        assert 'action="/ops/console/login"' in text and 'href="/ops/console/static/app.css"' in text
        assert "Secure" in r.headers["Set-Cookie"] and "Path=/ops/console" in r.headers["Set-Cookie"]
        status, text, _ = await b.get("/static/app.js")
        assert status == 200 and "htmx:configRequest" in text
        status, _text, r = await b.get("", allow_redirects=False)  # /console -> /console/
        assert status == 301 and r.headers["Location"] == "/console/"
        # a POST whose Origin is the proxy's public address is the console's own
        assert await b.login() == 303
        status, text, _ = await b.post("/topics/update", {"topic": "ProxiedT", "read": "1", "write": "1"},
                                       headers={**proxy, "Origin": "https://mq.example.com"})
        assert status == 200 and "ProxiedT created" in text
        status, text, _ = await b.post("/topics/update", {"topic": "ProxiedT", "read": "1", "write": "1"},
                                       headers={**proxy, "Origin": "http://mq.example.com"})
        assert status == 403
    # headers from a peer that is not a trusted proxy are ignored
    async with console(tmp_path, namesrv.addr, trusted_proxies="192.0.2.1") as server, \
            browser(server, login=None) as b:
        status, _text, r = await b.get("/topics", headers=proxy, allow_redirects=False)
        assert unquote(r.headers["Location"]) == "/login?next=/topics"
        status, _text, r = await b.get("/login", headers=proxy)
        assert "Secure" not in r.headers["Set-Cookie"]


async def test_lag_is_never_negative_and_resets_preview_then_apply(
        tmp_path: Path, namesrv: NamesrvController, broker: BrokerController) -> None:
    async with console(tmp_path, namesrv.addr) as server, browser(server) as b, \
            AdminClient([namesrv.addr]) as admin:
        await admin.update_topic("LagT", read_queues=2, write_queues=2)
        before = int(time.time() * 1000) - 1
        await _produce(namesrv.addr, "LagT", 6)
        # offsets for the group at the start of every queue: the whole topic is lag
        await api_ops.reset_offset(admin, "LagG", "LagT", before, force=True, addrs=[broker.addr])
        status, text, _ = await b.get("/group?name=LagG")
        assert status == 200
        # the broker serves POP: nothing of the group in flight
        assert 'data-lag="6"' in text and '<td class="pop-count">0</td>' in text
        lags = [int(x) for x in re.findall(r'<td class="lag">(-?\d+)</td>', text)]
        assert lags and min(lags) >= 0 and sum(lags) == 6

        async def listed() -> bool:  # the list is a snapshot rebuilt in the background when older than its TTL
            _status, page, _ = await b.get("/groups?q=LagG")
            return ">LagG</a>" in page and "<td>6</td>" in page

        await eventually(listed, timeout=10, message="LagG in the group list with lag 6")
        # preview a skip: every queue would move to its end, nothing changes yet
        status, text, _ = await b.post("/group/reset", {"group": "LagG", "topic": "LagT", "mode": "skip"},
                                       headers={"HX-Request": "true"})
        assert "Preview" in text and "6 messages in all (skipped)" in text_of(text)
        assert "rmq-admin skipAccumulatedMessage -n " + namesrv.addr + " -g LagG -t LagT" in text_of(text)
        status, text, _ = await b.get("/group/lag?name=LagG")
        assert 'data-lag="6"' in text
        status, text, _ = await b.post("/group/reset", {"group": "LagG", "topic": "LagT", "mode": "skip",
                                                        "apply": "1"})
        assert "reset on 1 master" in text
        status, text, _ = await b.get("/group/lag?name=LagG")
        assert 'data-lag="0"' in text
        # back to a time before the messages: the preview says 6 would be consumed again
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(before / 1000 - 1))
        status, text, _ = await b.post("/group/reset", {"group": "LagG", "topic": "LagT", "mode": "time",
                                                        "time": stamp})
        assert "-6 messages in all (consumed again)" in text_of(text).replace("\u2009", "")
        status, text, _ = await b.get("/backlogs")
        assert re.search(r'class="timer-state">\s*0\s*<', text) and "no pending transaction" in text  # no timer waits


async def test_messages_by_range_key_and_id_with_cursor_and_partial(
        tmp_path: Path, namesrv: NamesrvController, broker: BrokerController) -> None:
    async with console(tmp_path, namesrv.addr, page_size=3, message_scan_limit=4) as server, browser(server) as b, \
            AdminClient([namesrv.addr]) as admin:
        await admin.update_topic("RangeT", read_queues=2, write_queues=2)
        ids = await _produce(namesrv.addr, "RangeT", 10, keys="order-7")
        seen: list[str] = []
        path = "/messages?mode=range&go=1&topic=RangeT"
        for _ in range(10):
            status, text, _ = await b.get(path)
            assert status == 200, text_of(text)
            seen.extend(re.findall(r'id=([0-9A-F]{32})">', text))
            found = re.search(r'id="next-page" href="([^"]+)"', text)
            if not found:
                break
            path = found.group(1).replace("&amp;", "&")
        assert sorted(seen) == sorted(ids)  # every message once, across pages of 3
        # a filter that matches nothing reads at most messageScanLimit records and says so
        status, text, _ = await b.get("/messages?mode=range&go=1&topic=RangeT&filter=nothing-matches")
        assert 'id="partial-notice"' in text and "Partial result: 4 records read" in text_of(text)
        assert 'id="next-page"' in text
        status, text, _ = await b.get("/messages?mode=key&go=1&topic=RangeT&key=order-7")
        assert sorted(re.findall(r'id=([0-9A-F]{32})">', text)) == sorted(ids)
        status, text, _ = await b.get(f"/messages?mode=id&go=1&id={ids[3]}")
        assert re.findall(r'id=([0-9A-F]{32})">', text) == [ids[3]]
        status, text, _ = await b.get(f"/message?topic=RangeT&id={ids[3]}&view=hex")
        assert status == 200 and "00000000  6d 33" in text and "order-7" in text
        status, text, _ = await b.get(f"/message?topic=RangeT&id={ids[3]}&view=base64")
        assert "bTM=" in text
        status, body, _ = await b.get(f"/message/body?topic=RangeT&id={ids[3]}")
        assert body == "m3"


async def test_dlq_browse_resend_and_csv(tmp_path: Path, namesrv: NamesrvController,
                                         broker: BrokerController) -> None:
    group = "DlqG"
    async with console(tmp_path, namesrv.addr) as server, browser(server) as b, \
            AdminClient([namesrv.addr]) as admin:
        await admin.update_topic(dlq_topic(group), read_queues=1, write_queues=1)
        ids = await _produce(namesrv.addr, dlq_topic(group), 3, keys="dead")
        await server.console.view.topic_cache.rebuild() if server.console else None
        status, text, _ = await b.get("/dlq")
        assert f'<option value="{group}"' in text
        status, text, _ = await b.get(f"/dlq?group={group}")
        assert sorted(re.findall(r'name="id" value="([0-9A-F]{32})"', text)) == sorted(ids)
        status, text, _ = await b.get(f"/dlq/export?group={group}")
        rows = list(csv.reader(io.StringIO(text)))
        assert rows[0][0] == "msgId" and len(rows) == 4 and {r[13] for r in rows[1:]} == {"m0", "m1", "m2"}
        status, text, _ = await b.post("/dlq/resend", {"group": group, "id": ids[0]})
        assert status == 200, text_of(text)
        assert "1 dead letter(s) resent" in text and f"rmq-admin resendMessage -n {namesrv.addr}" \
            f" -g {group} -i {ids[0]} -t %DLQ%{group}" in text_of(text)

        async def in_retry_topic() -> bool:
            return any(q.max_offset > 0 for q in await admin.topic_status(retry_topic(group)))

        await eventually(in_retry_topic, timeout=10, message="the resent copy in the retry topic")


async def test_acl_signed_requests_and_no_secret_shown_or_logged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pocketmq.console.config import ConsoleConfig, describe
    from tests.cluster import start_broker, start_namesrv

    secret = "console-Secret-8d1f"
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text("globalWhiteRemoteAddresses:\naccounts:\n  - accessKey: consoleKey\n"
                        f"    secretKey: {secret}\n    admin: true\n")
    ns = await start_namesrv(tmp_path)
    b = await start_broker(tmp_path, "broker-acl", ns.addr, {"aclEnable": "true", "plainAclFile": str(acl_file)})
    try:
        assert secret not in describe(ConsoleConfig(access_key="consoleKey", secret_key=secret))
        assert secret not in repr(ConsoleConfig(access_key="consoleKey", secret_key=secret))
        async with console(tmp_path, ns.addr, access_key="consoleKey", secret_key=secret) as server, \
                browser(server) as web:
            status, text, _ = await web.post("/topics/update", {"topic": "AclT", "read": "1", "write": "1"})
            assert status == 200 and "AclT created" in text and "POCKETMQ_SECRET_KEY=…" in text
            for path in ("/", "/topics", "/topic?name=AclT", "/backlogs"):
                status, text, _ = await web.get(path)
                assert status == 200 and secret not in text
        async with console(tmp_path, ns.addr) as server, browser(server) as web:  # unsigned: refused, shown
            status, text, _ = await web.post("/topics/update", {"topic": "AclT2", "read": "1", "write": "1"})
            assert status == 400 and "The broker refused" in text
    finally:
        await b.stop()
        await ns.stop()
    out, err = capsys.readouterr()
    assert secret not in out + err


async def test_console_with_its_own_name_server(tmp_path: Path) -> None:
    """``--with-namesrv``: the console process runs a name server a broker registers with, on one loop."""
    from pocketmq.console.config import ConsoleConfig
    from pocketmq.console.server import ConsoleServer
    from pocketmq.namesrv.config import NamesrvConfig
    from tests.cluster import start_broker
    from tests.console.support import Browser

    server = ConsoleServer(ConsoleConfig(listen_port=0, login_required=False),
                           namesrv=NamesrvConfig(listen_host="127.0.0.1", listen_port=0,
                                                 kv_config_path=str(tmp_path / "kv.json")))
    await server.start()
    try:
        assert server.namesrv is not None and server.config.namesrv_addr == server.namesrv.addr
        b = await start_broker(tmp_path, "broker-embedded", server.namesrv.addr)
        web = Browser(server.url)
        try:
            status, text, _ = await web.get("/")
            assert status == 200 and b.addr in text and "anonymous" in text
        finally:
            await web.close()
            await b.stop()
    finally:
        await server.stop()


def test_rmq_console_process_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    import signal
    import sys
    import urllib.request

    from tests.procs import Proc

    proc = Proc([sys.executable, "-m", "pocketmq.console.main", "--with-namesrv", "--namesrv-port", "0",
                 "--port", "0", "--no-login", "--kv-config-path", str(tmp_path / "kv.json"), "--log-format", "json"],
                "CONSOLE READY")
    try:
        addr = proc.wait_ready()
        with urllib.request.urlopen(f"http://{addr}/healthz", timeout=10) as r:
            assert r.read() == b"ok\n"
        with urllib.request.urlopen(f"http://{addr}/", timeout=10) as r:
            assert b"Brokers" in r.read()
        proc.signal(signal.SIGTERM)
        assert proc.popen.wait(20) == 0
        assert "console_stopped" in proc.stderr_text() and "console_login_off" in proc.stderr_text()
    finally:
        proc.kill()


async def test_a_time_range_pages_past_two_thousand_messages(tmp_path: Path, namesrv: NamesrvController,
                                                              broker: BrokerController) -> None:
    """rocketmq-dashboard stops at 2,000 messages per time query; the cursor goes on to the end."""
    total = 2100
    async with console(tmp_path, namesrv.addr, page_size=1000) as server, browser(server) as b, \
            AdminClient([namesrv.addr]) as admin:
        await admin.update_topic("ManyT", read_queues=1, write_queues=1)
        async with Producer("ConsoleManyPG", namesrv_addr=namesrv.addr, instance_name="ct-many") as producer:
            for start in range(0, total, 100):
                await producer.send_batch([Message("ManyT", f"n{i}".encode()) for i in range(start, start + 100)])
        seen: list[str] = []
        path = "/messages?mode=range&go=1&topic=ManyT"
        pages = 0
        while path and pages < 5:
            status, text, _ = await b.get(path)
            assert status == 200 and 'id="partial-notice"' not in text
            seen.extend(re.findall(r'id=([0-9A-F]{32})">', text))
            found = re.search(r'id="next-page" href="([^"]+)"', text)
            path = found.group(1).replace("&amp;", "&") if found else ""
            pages += 1
        assert pages == 3 and len(seen) == total and len(set(seen)) == total
