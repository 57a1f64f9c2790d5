"""Put/get counters and rates for GET_BROKER_RUNTIME_INFO (and later the metrics endpoint).

Counters are plain integers bumped on the hot path; a once-a-second sample into a bounded ring turns
them into rates over 10 s, 60 s and 600 s windows, as RocketMQ's ``putTps`` reports them.
"""

from __future__ import annotations

import time
from collections import deque


class BrokerStats:
    WINDOWS = (10, 60, 600)

    def __init__(self) -> None:
        self.boot_timestamp_ms = int(time.time() * 1000)
        self.put_messages = 0
        self.put_bytes = 0
        self.get_messages = 0
        self.get_bytes = 0
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=max(self.WINDOWS) + 2)

    def on_put(self, topic: str, count: int, size: int) -> None:
        self.put_messages += count
        self.put_bytes += size

    def on_get(self, count: int, size: int) -> None:
        self.get_messages += count
        self.get_bytes += size

    def sample(self, now: float | None = None) -> None:
        """Record the counters (called once a second by the controller)."""
        self._samples.append((time.monotonic() if now is None else now, self.put_messages, self.get_messages))

    def _rate(self, window: int, index: int) -> float:
        if len(self._samples) < 2:
            return 0.0
        newest = self._samples[-1]
        oldest = self._samples[0]
        for sample in self._samples:
            if newest[0] - sample[0] <= window:
                oldest = sample
                break
        elapsed = newest[0] - oldest[0]
        return (newest[index] - oldest[index]) / elapsed if elapsed > 0 else 0.0

    def put_tps(self) -> str:
        return " ".join(f"{self._rate(w, 1):.2f}" for w in self.WINDOWS)

    def get_tps(self) -> str:
        return " ".join(f"{self._rate(w, 2):.2f}" for w in self.WINDOWS)

    def runtime(self) -> str:
        seconds = int(time.time() - self.boot_timestamp_ms / 1000)
        days, rest = divmod(seconds, 86400)
        hours, rest = divmod(rest, 3600)
        minutes, seconds = divmod(rest, 60)
        return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"
