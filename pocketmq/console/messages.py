"""Finding and showing messages: a topic's messages in a time range with cursor paging, bodies shown safely,
a message's consumption status per group, and DLQ rows as CSV.

**Time range.** For each queue of the topic (broker by broker, queue by queue) the range is turned into
offsets with SEARCH_OFFSET_BY_TIMESTAMP (the first offset stored at or after ``begin``, and at or after
``end + 1`` as the exclusive end), then read with pulls that commit nothing. A page holds at most
``pageSize`` messages in queue order; the :class:`Cursor` (opaque, in the page's link) says where each queue
goes on, so a range of any size is paged without a cap at 2,000. A request reads at most
``messageScanLimit`` records and spends at most :data:`SCAN_SECONDS`; when a filter (tag or key text)
leaves the page unfilled at that point, it answers with what it found, a "partial" notice and a cursor.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import csv
import io
import json
import time
from dataclasses import dataclass
from typing import Any

from pocketmq.admin import api_ops
from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.remoting import route as rd

#: Wall-clock budget of one message-list request.
SCAN_SECONDS = 2.0
#: Longest cursor accepted back from a browser (a queue is ~40 bytes of it).
MAX_CURSOR_LENGTH = 64 * 1024
BODY_MODES = ("text", "json", "hex", "base64")


class CursorError(ValueError):
    """A cursor that this console did not make (or that was cut)."""


@dataclass(frozen=True, slots=True)
class QueueSpan:
    broker_name: str
    queue_id: int
    next_offset: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class Cursor:
    topic: str
    spans: tuple[QueueSpan, ...]

    def encode(self) -> str:
        data = [self.topic, [[s.broker_name, s.queue_id, s.next_offset, s.end_offset] for s in self.spans]]
        return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        if len(text) > MAX_CURSOR_LENGTH:
            raise CursorError("cursor too long")
        try:
            raw = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
            topic, spans = raw
            parsed = tuple(QueueSpan(str(b), int(q), int(n), int(e)) for b, q, n, e in spans)
        except (ValueError, TypeError, binascii.Error):
            raise CursorError("not a cursor of this console") from None
        if not isinstance(topic, str) or any(s.next_offset < 0 or s.end_offset < s.next_offset for s in parsed):
            raise CursorError("not a cursor of this console")
        return cls(topic, parsed)


@dataclass(frozen=True, slots=True)
class RangePage:
    messages: tuple[MessageExt, ...]
    cursor: Cursor | None
    scanned: int
    partial: bool
    notice: str = ""


def matches(message: MessageExt, needle: str) -> bool:
    """A filter over tags and keys (exact tag, or text within KEYS)."""
    return not needle or message.tags == needle or needle in (message.keys or "")


def master_or_any(route: rd.TopicRouteData) -> dict[str, str]:
    """Broker name → the address to read from: its master, else its lowest-numbered slave."""
    out = {}
    for bd in route.broker_datas:
        if bd.broker_addrs:
            out[bd.broker_name] = bd.broker_addrs.get(rd.MASTER_ID) or bd.broker_addrs[min(bd.broker_addrs)]
    return out


async def start_cursor(admin: AdminClient, topic: str, begin_ms: int, end_ms: int) -> Cursor:
    """The cursor of the first page of ``[begin_ms, end_ms]``: each queue's offsets for the two times."""
    route = await admin.topic_route(topic)
    addrs = master_or_any(route)
    spans = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        addr = addrs.get(qd.broker_name)
        if addr is None:
            continue
        for queue_id in range(qd.read_queue_nums):
            first = await api_ops.search_offset(admin, addr, topic, queue_id, begin_ms)
            end = await api_ops.search_offset(admin, addr, topic, queue_id, end_ms + 1)
            if end > first:
                spans.append(QueueSpan(qd.broker_name, queue_id, first, end))
    return Cursor(topic, tuple(spans))


async def read_page(admin: AdminClient, cursor: Cursor, *, page_size: int, scan_limit: int,
                    needle: str = "", clock: Any = time.monotonic) -> RangePage:
    """Up to ``page_size`` messages from ``cursor`` on, reading at most ``scan_limit`` records and
    :data:`SCAN_SECONDS`; the cursor of what is left (None at the end)."""
    route = await admin.topic_route(cursor.topic)
    addrs = master_or_any(route)
    found: list[MessageExt] = []
    spans = list(cursor.spans)
    scanned = 0
    started = clock()
    partial = False
    while spans and len(found) < page_size:
        if scanned >= scan_limit or clock() - started > SCAN_SECONDS:
            partial = True
            break
        span = spans[0]
        addr = addrs.get(span.broker_name)
        if addr is None:
            raise AdminError(f"broker {span.broker_name} has no reachable member for {cursor.topic}")
        want = min(page_size - len(found) if not needle else scan_limit - scanned, scan_limit - scanned)
        batch = await api_ops.read_queue(admin, addr, cursor.topic, span.queue_id, span.next_offset,
                                         min(span.end_offset, span.next_offset + max(want, 1)), span.broker_name)
        if not batch:  # the rest of the queue is gone (retention) or unreadable: move on
            spans.pop(0)
            continue
        for message in batch:
            scanned += 1
            next_offset = message.queue_offset + 1
            if matches(message, needle):
                found.append(message)
            if len(found) >= page_size:
                break
        spans[0] = QueueSpan(span.broker_name, span.queue_id, next_offset, span.end_offset)
        if next_offset >= span.end_offset:
            spans.pop(0)
    notice = ""
    if partial:
        notice = (f"Partial result: {scanned} records read in this request (limit {scan_limit} records or "
                  f"{SCAN_SECONDS:.0f} s) and {len(found)} matched. Use 'Next' to read on from here, or narrow the "
                  "time range.")
    return RangePage(tuple(found), Cursor(cursor.topic, tuple(spans)) if spans else None, scanned, partial, notice)


# -- bodies -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BodyView:
    mode: str
    text: str
    cut: bool
    note: str = ""


def utf8_prefix(data: bytes, limit: int) -> str:
    """At most ``limit`` bytes as text, never cutting a UTF-8 sequence in two (invalid bytes are shown as
    U+FFFD)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    return decoder.decode(data[:limit], final=len(data) <= limit)


def hex_dump(data: bytes) -> str:
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at:at + 16]
        printable = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{at:08x}  {chunk.hex(' '):<47}  {printable}")
    return "\n".join(lines)


def render_body(body: bytes, mode: str, limit: int) -> BodyView:
    """``body`` as text, pretty JSON, a hex dump or base64, cut to about ``limit`` characters of output."""
    mode = mode if mode in BODY_MODES else "text"
    if mode == "json":
        if len(body) > limit:
            return BodyView(mode, utf8_prefix(body, limit), True, "too large to pretty-print: shown as text")
        try:
            return BodyView(mode, json.dumps(json.loads(body), indent=2, ensure_ascii=False), False)
        except (ValueError, UnicodeDecodeError):
            return BodyView("text", utf8_prefix(body, limit), False, "not JSON: shown as text")
    if mode == "hex":
        shown = body[:max(limit // 4, 16)]
        return BodyView(mode, hex_dump(shown), len(shown) < len(body))
    if mode == "base64":
        shown = body[:max(limit // 4 * 3, 3)]
        return BodyView(mode, base64.b64encode(shown).decode(), len(shown) < len(body))
    return BodyView(mode, utf8_prefix(body, limit), len(body) > limit)


# -- consumption status -------------------------------------------------------------------------------------


async def consumption_status(admin: AdminClient, message: MessageExt, groups: list[str]) -> list[dict[str, Any]]:
    """For each group, whether it has consumed the message: its committed offset of the message's queue is past
    the message's offset (on the broker that stores it)."""
    route = await admin.topic_route(message.topic)
    addr = master_or_any(route).get(message.broker_name)
    out: list[dict[str, Any]] = []
    for group in groups:
        status, offset = "unknown", None
        if addr is not None:
            try:
                entries = await api_ops.consume_stats(admin, addr, group, message.topic)
            except AdminError as exc:
                out.append({"group": group, "status": f"error: {exc}", "consumerOffset": None})
                continue
            entry = next((e for e in entries if int(e["queueId"]) == message.queue_id), None)
            if entry is not None:
                offset = int(entry.get("consumerOffset", 0))
                status = "consumed" if offset > message.queue_offset else "not consumed yet"
        out.append({"group": group, "status": status, "consumerOffset": offset})
    return out


# -- CSV ----------------------------------------------------------------------------------------------------

CSV_COLUMNS = ("msgId", "offsetMsgId", "topic", "originTopic", "brokerName", "queueId", "queueOffset", "storeTime",
               "bornTime", "reconsumeTimes", "tags", "keys", "bodyLength", "body", "bodyEncoding")


def _cell(value: object) -> str:
    """A CSV cell a spreadsheet will not run as a formula."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def csv_row(m: MessageExt, body_limit: int) -> list[str]:
    try:
        body, encoding = m.body[:body_limit].decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        body, encoding = base64.b64encode(m.body[:body_limit]).decode(), "base64"
    if len(m.body) > body_limit:
        encoding += " (cut)"
    values = (m.msg_id, m.offset_msg_id, m.topic, m.get_property("RETRY_TOPIC") or "", m.broker_name, m.queue_id,
              m.queue_offset, m.store_timestamp, m.born_timestamp, m.reconsume_times, m.tags or "", m.keys or "",
              len(m.body), body, encoding)
    return [_cell(v) for v in values]


def csv_text(rows: list[list[str]], *, header: bool) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    if header:
        writer.writerow(CSV_COLUMNS)
    writer.writerows(rows)
    return out.getvalue()
