"""The console in a real browser: Playwright drives Debian's headless chromium (``make install-chromium``) against a
name server, a broker and the console on an event loop in a background thread.

The flow a person follows: an unauthenticated visit lands on the login page; log in; create a topic; find it by
search; send three messages with a key from the page; find them by key and by id; watch a group's lag fall to 0
while a consumer runs; preview an offset reset. Every request the browser makes is intercepted and any that
would leave 127.0.0.1 is aborted and fails the test; the browser console must show no error (a blocked inline
script or style, a failed request, a JavaScript exception). Screenshots of each page go to the test's tmp dir
and to ``artifacts/console-screenshots/`` (git-ignored).
"""

from __future__ import annotations

import os
import re
import shutil
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, Error, Page, Route, expect, sync_playwright

from pocketmq.admin import api_ops
from pocketmq.admin.api import AdminClient
from pocketmq.broker.controller import BrokerController
from pocketmq.client import Message, Producer
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.console.server import ConsoleServer
from pocketmq.namesrv.controller import NamesrvController
from tests.client.consumer.consumer_support import FAST, Recorder, instance_name
from tests.cluster import start_broker, start_namesrv
from tests.console.support import ADMIN, ADMIN_PASSWORD, console
from tests.helpers import LoopThread

pytestmark = pytest.mark.timeout(240)

CHROMIUM = os.environ.get("POCKETMQ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "console-screenshots"
TOPIC = "BrowserOrders"
GROUP = "BrowserGroup"
LOCAL_HOSTS = ("127.0.0.1", "localhost")



@dataclass
class Env:
    loop: LoopThread
    namesrv: NamesrvController
    broker: BrokerController
    server: ConsoleServer
    shots: Path
    page: Page
    context: BrowserContext
    console_errors: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return self.server.url.rstrip("/")

    def shot(self, name: str) -> None:
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, ARTIFACTS / path.name)


def _guard_routes(env: Env) -> None:
    def route(r: Route) -> None:
        host = urllib.parse.urlsplit(r.request.url).hostname or ""
        if r.request.url.startswith(("data:", "blob:")) or host in LOCAL_HOSTS:
            r.continue_()
        else:
            env.external.append(r.request.url)
            r.abort()

    env.context.route("**/*", route)


def _watch_console(env: Env) -> None:
    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error":
            env.console_errors.append(f"{msg.type}: {msg.text} ({msg.location.get('url', '')})")

    def on_page_error(exc: Error) -> None:
        env.console_errors.append(f"pageerror: {exc}")

    env.page.on("console", on_console)
    env.page.on("pageerror", on_page_error)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make install-chromium` (Debian's chromium package)")
    tmp = tmp_path_factory.mktemp("console-browser")
    loop = LoopThread()
    ns = loop.run(start_namesrv(tmp))
    broker = loop.run(start_broker(tmp, "broker-a", ns.addr, {"traceTopicEnable": "true"}))
    manager = console(tmp, ns.addr, snapshot_ttl_ms=500)
    server = loop.run(manager.__aenter__())
    shots = tmp / "screenshots"
    shots.mkdir()
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1360, "height": 900}, service_workers="block")
        context.set_default_timeout(20_000)
        page = context.pages[0] if context.pages else context.new_page()
        e = Env(loop, ns, broker, server, shots, page, context)
        _guard_routes(e)
        _watch_console(e)
        try:
            yield e
        finally:
            context.close()
            loop.run(manager.__aexit__(None, None, None))
            loop.run(broker.stop())
            loop.run(ns.stop())
            loop.close()


def _produce(env: Env, count: int) -> None:
    async def send() -> None:
        async with Producer("BrowserPG", namesrv_addr=env.namesrv.addr, instance_name=instance_name("bp")) as p:
            for i in range(count):
                await p.send(Message(TOPIC, f"backlog {i}".encode()))

    env.loop.run(send())


def test_a_person_uses_the_console(env: Env) -> None:
    page = env.page
    # an unauthenticated visit lands on the login page, and comes back to where it was going
    page.goto(env.base + "/topics")
    expect(page.locator("h1")).to_have_text("Log in")
    assert "/login" in page.url
    env.shot("01-login")
    page.fill("input[name=username]", ADMIN)
    page.fill("input[name=password]", ADMIN_PASSWORD)
    page.click("#login-form button[type=submit]")
    expect(page.locator("h1")).to_have_text("Topics")
    assert urllib.parse.urlsplit(page.url).path == "/topics"

    # create a topic, then find it by search
    page.fill("#new-topic-name", TOPIC)
    page.fill("#create-topic-form input[name=read]", "2")
    page.fill("#create-topic-form input[name=write]", "2")
    page.click("#create-topic-form button[type=submit]")
    expect(page.locator("#create-topic-form-result .result.ok")).to_contain_text(f"Topic {TOPIC} created")
    expect(page.locator("#create-topic-form-result code")).to_contain_text(
        f"rmq-admin updateTopic -n {env.namesrv.addr} -t {TOPIC} -r 2 -w 2 -p 6")
    page.fill("#topic-search", "browserord")
    expect(page.locator("#topics a.topic-link")).to_have_text([TOPIC])
    env.shot("02-topics-search")

    # send three messages with a key from the topic's page
    page.click(f"#topics a.topic-link:text('{TOPIC}')")
    expect(page.locator("#topic-name")).to_have_text(TOPIC)
    page.fill("#send-form textarea[name=body]", '{"order": 7, "state": "paid"}')
    page.fill("#send-form input[name=keys]", "order-7")
    page.fill("#send-form input[name=count]", "3")
    page.click("#send-form button[type=submit]")
    expect(page.locator("#send-result .result.ok")).to_contain_text(f"3 message(s) sent to {TOPIC}")
    sent_ids = re.findall(r"offset id ([0-9A-F]{32})", page.locator("#send-result").inner_text())
    assert len(sent_ids) == 3
    env.shot("03-topic")

    # find them by key, then one by id, then open it
    page.goto(env.base + "/messages?" + urllib.parse.urlencode({"mode": "key", "topic": TOPIC}))
    page.fill("#search-key", "order-7")
    page.click("#search-go")
    expect(page.locator("#message-table a.msg-link")).to_have_count(3)
    found = {page.locator("#message-table tbody tr").nth(i).locator("td").nth(1).inner_text() for i in range(3)}
    assert found == set(sent_ids)
    env.shot("04-messages-by-key")
    page.goto(env.base + "/messages?mode=id")
    page.fill("#search-id", sent_ids[1])
    page.click("#search-go")
    expect(page.locator("#message-table a.msg-link")).to_have_count(1)
    page.click("#message-table a.msg-link")
    expect(page.locator("#message-meta")).to_contain_text(sent_ids[1])
    page.click("nav.tabs a:text('json')")
    expect(page.locator("#message-body")).to_contain_text('"state": "paid"')
    expect(page.locator("#trace")).to_contain_text("sent")
    env.shot("05-message")

    # a group with a backlog: its lag on the page falls to 0 while a consumer runs
    _produce(env, 40)

    async def group_at_start() -> None:
        async with AdminClient([env.namesrv.addr]) as admin:
            await api_ops.reset_offset(admin, GROUP, TOPIC, 0, force=True, addrs=[env.broker.addr])

    env.loop.run(group_at_start())
    page.goto(env.base + "/group?" + urllib.parse.urlencode({"name": GROUP}))
    expect(page.locator("#total-lag")).to_have_attribute("data-lag", "43")
    env.shot("06-group-with-lag")
    recorder = Recorder()
    consumer = PushConsumer(GROUP, namesrv_addr=env.namesrv.addr, instance_name=instance_name("bc"), **FAST)
    consumer.subscribe(TOPIC, "*")
    consumer.register_handler(recorder)
    env.loop.run(consumer.start())
    try:
        expect(page.locator("#total-lag")).to_have_attribute("data-lag", "0", timeout=60_000)
        page.reload()  # the clients table is not polled
        expect(page.locator("#clients tbody tr")).to_have_count(1)
        expect(page.locator("#clients")).to_contain_text("PYTHON")
        env.shot("07-group-caught-up")
        # reset the offset to a time before the messages: the preview shows every queue moving back
        before = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 3600))
        page.select_option("#reset-topic", TOPIC)
        page.fill("#reset-time", before)
        page.click("#reset-preview")
        expect(page.locator("#reset-preview-table")).to_contain_text("consumed again")
        expect(page.locator("#reset-preview-table .new-offset")).to_have_text(["0", "0"])
        expect(page.locator("#reset-preview-table code")).to_contain_text(f"rmq-admin resetOffsetByTime -n "
                                                                           f"{env.namesrv.addr} -g {GROUP} -t {TOPIC}")
        env.shot("08-reset-preview")
    finally:
        env.loop.run(consumer.shutdown())

    # the other pages, each with a screenshot
    for name, path, marker in (("09-cluster", "/", "#broker-table"), ("10-groups", "/groups", "#groups"),
                               ("11-dlq", "/dlq", "h1"), ("12-backlogs", "/backlogs", "#timer-table"),
                               ("13-messages-range", f"/messages?mode=range&go=1&topic={TOPIC}", "#message-table")):
        page.goto(env.base + path)
        expect(page.locator(marker).first).to_be_visible()
        if path == "/":
            expect(page.locator("body")).to_have_attribute("data-ready", "1")  # the charts have their data
            expect(page.locator("#broker-table")).to_contain_text(env.broker.addr)
            expect(page.locator("#chart-tps canvas")).to_have_count(1)
        env.shot(name)

    assert env.external == [], f"requests that would have left 127.0.0.1: {env.external}"
    assert env.console_errors == [], f"browser console errors: {env.console_errors}"


def test_a_post_without_the_csrf_token_is_refused(env: Env) -> None:
    page = env.page
    page.goto(env.base + "/topics")
    if "/login" in page.url:
        page.fill("input[name=username]", ADMIN)
        page.fill("input[name=password]", ADMIN_PASSWORD)
        page.click("#login-form button[type=submit]")
    form: dict[str, str | float | bool] = {"topic": "ForgedTopic", "read": "1", "write": "1", "perm": "6",
                                           "type": "NORMAL"}
    refused = env.context.request.post(env.base + "/topics/update", form=form)  # the session cookie, no token
    assert refused.status == 403 and "CSRF" in refused.text()
    token = page.locator('meta[name="csrf-token"]').get_attribute("content")
    accepted = env.context.request.post(env.base + "/topics/update", form={**form, "_csrf": token or ""})
    assert accepted.status == 200 and "ForgedTopic created" in accepted.text()
    assert env.console_errors == [] and env.external == []
