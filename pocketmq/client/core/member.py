"""The lifecycle every producer and consumer shares (RocketMQ's ``ServiceState``): created → running →
stopping → stopped, never started twice. A member is created anywhere and started on an event loop, where it
joins that loop's :class:`~pocketmq.client.core.instance.MQClientInstance`; ``async with member:`` starts it and shuts
it down."""

from __future__ import annotations

import enum
from types import TracebackType
from typing import ClassVar, NoReturn, Self

from pocketmq.client.core.config import ClientOptions
from pocketmq.client.core.errors import MQClientError
from pocketmq.client.core.instance import MQClientInstance

__all__ = ["ClientMember", "State"]


class State(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


class ClientMember:
    """Base of producers and consumers: their state, the instance joined at start, the context manager."""

    #: "producer" or "consumer", for error messages.
    kind: ClassVar[str] = "member"
    #: What a call in the wrong state raises.
    state_error: ClassVar[type[MQClientError]] = MQClientError

    def __init__(self, config: ClientOptions) -> None:
        self.config = config
        self.group = config.group
        self._state = State.CREATED
        self._instance: MQClientInstance | None = None

    async def start(self) -> None:
        raise NotImplementedError

    async def shutdown(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()

    @property
    def running(self) -> bool:
        return self._state is State.RUNNING

    @property
    def instance(self) -> MQClientInstance:
        """The shared client instance (routes, connections, heartbeats); only once started."""
        if self._instance is None:
            raise self.state_error(f"the {self.kind} has not been started")
        return self._instance

    def _may_start(self) -> bool:
        """At the top of ``start``: ``False`` when already running; raises once stopped."""
        if self._state is State.RUNNING:
            return False
        if self._state is not State.CREATED:
            raise self.state_error(f"the {self.kind} is {self._state.value}; create a new one")
        return True

    def _may_stop(self) -> bool:
        """At the top of ``shutdown``: ``True`` (and stopping) when running; a member never started is just
        marked stopped."""
        if self._state is State.CREATED:
            self._state = State.STOPPED
            return False
        if self._state is not State.RUNNING:
            return False
        self._state = State.STOPPING
        return True

    def _raise_not_running(self) -> NoReturn:
        raise self.state_error(f"the {self.kind} is {self._state.value}, not running")
