"""Recovery drills on a real cluster (issue 14, "found already"): after a fault heals, the SDK uses the broker
again within seconds, whatever its isolation table and route poll say.

The cluster and the paced send stream are those of :mod:`tests.ops.test_faults` (two name servers, shortened
registration and expiry periods); unlike those drills, the producer keeps RocketMQ's isolation table (a
failure isolates a broker for 600 s), because what is tested is that the isolation ends when the broker
answers again.
"""

from __future__ import annotations

import itertools
import signal
import time
from pathlib import Path

from pocketmq.admin.cluster import LocalCluster
from pocketmq.client import Producer, SendStatus
from tests.helpers import eventually
from tests.ops.test_faults import BROKER_PROPS, NAMESRV_PROPS, STORED, Stream, create_topic, running_cluster, timed_send


def used(stream: Stream, broker: str, since: float) -> int:
    """Sends ``broker`` answered with a stored status since ``since`` (its slave may not be back yet)."""
    return sum(1 for t, _, r in stream.results
               if t >= since and r.status in STORED and r.message_queue.broker_name == broker)


def longest_gap_without_ok(stream: Stream, start: float, end: float) -> float:
    """The longest time within [start, end] without a SEND_OK anywhere in the cluster."""
    times = sorted(t for t, _, r in stream.results if start <= t <= end and r.status is SendStatus.SEND_OK)
    edges = [start, *times, end]
    return max(b - a for a, b in itertools.pairwise(edges))


async def kill_and_restart_master(cluster: LocalCluster, stream: Stream, name: str) -> float:
    """SIGKILL ``name``, wait until the other group takes the sends, restart it; returns the restart time."""
    cluster.signal(name, signal.SIGKILL)
    killed_at = time.monotonic()
    await cluster.wait_exit(name, 10)
    await eventually(lambda: stream.ok("broker-b", since=killed_at + 0.5) >= 20, timeout=20,
                     message="sends continuing on broker-b")
    await cluster.restart(name)
    return time.monotonic()


async def test_isolation_of_a_restarted_master_ends_and_a_slow_group_does_not_starve_it(tmp_path: Path) -> None:
    """The schedule of issue 14: broker-a's master killed and restarted, then broker-b's slave frozen (its
    SYNC_MASTER answers FLUSH_SLAVE_TIMEOUT after ``slaveTimeout``). broker-a must take sends again within
    seconds of its restart (it used to stay isolated for 600 s), and while broker-b is slow every send goes to
    the healthy broker-a."""
    topic = "RecoverIsolation"
    async with running_cluster(tmp_path, "2m-2s-sync") as cluster:
        await create_topic(cluster, topic)
        # A fast route poll: this drill is about the isolation, not about finding the new address.
        async with Producer("recover-pg", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=3.0,
                            poll_name_server_interval=0.5) as producer:
            stream = Stream(producer, topic)
            try:
                await stream.flowing()
                restarted_at = await kill_and_restart_master(cluster, stream, "broker-a")
                await eventually(lambda: used(stream, "broker-a", restarted_at) >= 10, timeout=10,
                                 message="the restarted broker-a taking sends again")
                back_at = time.monotonic()
                await eventually(lambda: stream.ok("broker-a", since=back_at) >= 10, timeout=30,
                                 message="broker-a's slave re-attached (SEND_OK again)")
                cluster.signal("broker-b-s", signal.SIGSTOP)
                frozen_at = time.monotonic()
                try:
                    await eventually(lambda: stream.ok("broker-a", since=frozen_at) >= 200, timeout=15,
                                     message="sends flowing to broker-a while broker-b is slow")
                    frozen_until = time.monotonic()
                finally:
                    cluster.signal("broker-b-s", signal.SIGCONT)
            finally:
                await stream.stop()
        print(f"isolation drill: {stream.summary()}, back after {back_at - restarted_at:.2f} s")
        assert back_at - restarted_at < 10
        # At most one round of sends waits for broker-b's slave; broker-a takes the rest at once.
        assert longest_gap_without_ok(stream, frozen_at, frozen_until) < 3.0
        assert not [f for f in stream.failures if f.at >= restarted_at]


async def test_a_restarted_master_is_used_again_within_seconds_with_the_default_route_poll(tmp_path: Path) -> None:
    """A restarted master comes back on a new address (ephemeral ports) while the clients poll routes every
    30 s: the producer asks for the route again while the broker is unreachable, and uses the new master as
    soon as a name server routes it."""
    topic = "RecoverRoute"
    async with running_cluster(tmp_path, "2m-2s-sync") as cluster:
        await create_topic(cluster, topic)
        async with Producer("recover-route-pg", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=3.0) as producer:
            assert producer.config.poll_name_server_interval == 30.0
            stream = Stream(producer, topic)
            try:
                await stream.flowing()
                old_addr = cluster.broker("broker-a").addr
                restarted_at = await kill_and_restart_master(cluster, stream, "broker-a")
                assert cluster.broker("broker-a").addr != old_addr
                await eventually(lambda: used(stream, "broker-a", restarted_at) >= 10, timeout=10,
                                 message="the restarted broker-a taking sends again")
                back_at = time.monotonic()
            finally:
                await stream.stop()
        print(f"route drill: {stream.summary()}, back after {back_at - restarted_at:.2f} s")
        assert stream.failures == []


async def test_a_sync_master_waiting_for_a_frozen_slave_answers_inside_the_default_send_timeout(
    tmp_path: Path,
) -> None:
    """RocketMQ's defaults on both sides: the SYNC_MASTER waits 3 s for its slave (``slaveTimeout``) and the
    producer's send timeout is 3 s. With the slave frozen the master's FLUSH_SLAVE_TIMEOUT ("stored on the
    master only") must reach the application; it used to lose the race against the client's own timeout, and
    an application that retried the failure stored the message twice."""
    topic = "RecoverSlaveWait"
    defaults = {k: v for k, v in BROKER_PROPS.items() if k not in {"slaveTimeout", "haHousekeepingInterval"}}
    cluster = LocalCluster("2m-2s-sync", base_dir=tmp_path / "cluster", namesrv_count=1, ephemeral_ports=True,
                           overrides=defaults, namesrv_overrides=NAMESRV_PROPS, log_format="json")
    try:
        await cluster.start()
        await create_topic(cluster, topic)
        async with Producer("recover-wait-pg", namesrv_addr=cluster.namesrv_addr) as producer:
            assert producer.config.send_msg_timeout == 3.0
            warm_up, _ = await timed_send(producer, topic, b"warm-up", "broker-a")
            assert warm_up is SendStatus.SEND_OK
            cluster.signal("broker-a-s", signal.SIGSTOP)
            try:
                status, took = await timed_send(producer, topic, b"frozen-slave", "broker-a")
            finally:
                cluster.signal("broker-a-s", signal.SIGCONT)
        print(f"slave wait: {status.name} after {took:.2f} s")
        assert status is SendStatus.FLUSH_SLAVE_TIMEOUT
        assert 2.5 < took < 5.0
    finally:
        await cluster.stop()

