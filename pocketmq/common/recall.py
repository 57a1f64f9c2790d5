"""Recall handles of timer messages (RocketMQ 5.3's ``RecallMessageHandle``).

A broker answers the send of a timer message with a handle: base64url of ``v1 <topic> <broker name> <time>
<UNIQ_KEY>``, ``<time>`` being the delivery time in epoch ms plus one. RECALL_MESSAGE with that handle stores a
marker timer message due at ``<time>`` whose ``TIMER_DEL_UNIQKEY`` is :func:`delete_key`; the timer drops the
original when it is due, and the marker when it is (``broker.timer``). A handle comes back from a client: the
broker checks its topic, broker name and time against its own.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

VERSION_1 = "v1"


@dataclass(frozen=True, slots=True)
class RecallHandle:
    """One decoded handle; ``timestamp`` as the client sent it (a string, as RocketMQ keeps it)."""

    topic: str
    broker_name: str
    timestamp: str
    message_id: str

    def encode(self) -> str:
        raw = " ".join((VERSION_1, self.topic, self.broker_name, self.timestamp, self.message_id))
        return base64.urlsafe_b64encode(raw.encode()).decode()

    @classmethod
    def decode(cls, handle: str) -> RecallHandle:
        """The handle's fields; ValueError when it is not a v1 handle (padding may be left out, as Java allows)."""
        try:
            raw = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise ValueError("recall handle is invalid") from None
        items = raw.split(" ")
        if len(items) < 5 or items[0] != VERSION_1 or not all(items[1:5]) or not raw.isprintable():
            raise ValueError("recall handle is invalid")  # a control character would split a marker's properties
        return cls(items[1], items[2], items[3], items[4])

    @property
    def deliver_ms(self) -> int:
        """The marker's delivery time in epoch ms, -1 when the field is not a number."""
        try:
            return int(self.timestamp)
        except ValueError:
            return -1


def delete_key(topic: str, uniq_key: str) -> str:
    """What a recall marker's ``TIMER_DEL_UNIQKEY`` names: a message by its real topic and ``UNIQ_KEY``."""
    return f"{topic}+{uniq_key}"
