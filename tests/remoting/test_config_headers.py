"""Properties configuration and typed headers."""

from __future__ import annotations

import dataclasses
import enum

import pytest

from pocketmq.common.config import ConfigError, format_config, load_config, parse_properties
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import InvalidHeaderError
from pocketmq.remoting.headers import CommandHeader, GetRouteInfoRequestHeader, RegisterBrokerRequestHeader, wire


class Role(enum.Enum):
    ASYNC_MASTER = 1
    SLAVE = 2


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    broker_name: str = "broker-a"
    listen_port: int = 10911
    ratio: float = 0.75
    auto_create_topic_enable: bool = True
    broker_role: Role = Role.ASYNC_MASTER
    namesrv_addr: str | None = None


def test_parse_properties() -> None:
    text = "# comment\n! also\nbrokerName = broker-b\nlistenPort:10921\nnamesrvAddr=a:1;\\\n  b:2\nempty\n"
    assert parse_properties(text) == {
        "brokerName": "broker-b", "listenPort": "10921", "namesrvAddr": "a:1;b:2", "empty": "",
    }


def test_load_config_layers_and_types() -> None:
    props = {"brokerName": "b", "listenPort": "1", "ratio": "0.5", "autoCreateTopicEnable": "FALSE",
             "brokerRole": "slave"}
    cfg = load_config(Sample, props, listen_port=2, namesrv_addr=None)
    assert cfg == Sample("b", 2, 0.5, False, Role.SLAVE, None)
    assert "brokerRole=SLAVE" in format_config(cfg)
    assert "autoCreateTopicEnable=false" in format_config(cfg)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"brokerNam": "x"}, "unknown config key 'brokerNam'"),
        ({"listenPort": "ten"}, "bad value for listenPort"),
        ({"autoCreateTopicEnable": "yes"}, "bad value for autoCreateTopicEnable"),
        ({"brokerRole": "LEADER"}, "bad value for brokerRole"),
    ],
)
def test_load_config_rejects_bad_input(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(Sample, props)


@dataclasses.dataclass(frozen=True, slots=True)
class ShortNames(CommandHeader):
    producer_group: str = wire("a")
    queue_id: int = wire("e")
    unit_mode: bool | None = wire("k", None)


def test_header_wire_names_and_coercion() -> None:
    h = ShortNames.from_fields({"a": "G", "e": "3", "k": "true", "zzz": "ignored"})
    assert h == ShortNames("G", 3, True)
    assert h.to_fields() == {"a": "G", "e": "3", "k": "true"}
    assert ShortNames("G", 1).to_fields() == {"a": "G", "e": "1"}


def test_header_errors_are_clear() -> None:
    with pytest.raises(InvalidHeaderError, match="<e> is null"):
        ShortNames.from_fields({"a": "G"})
    with pytest.raises(InvalidHeaderError, match="<e> has a bad value 'x'"):
        ShortNames.from_fields({"a": "G", "e": "x"})
    with pytest.raises(InvalidHeaderError, match="<topic> is null"):
        GetRouteInfoRequestHeader.from_command(RemotingCommand(105))


def test_namesrv_header_camel_case() -> None:
    h = RegisterBrokerRequestHeader("a", "1.1.1.1:1", "C", "1.1.1.1:2", 1, compressed=True, body_crc32=5)
    fields = h.to_fields()
    assert fields["haServerAddr"] == "1.1.1.1:2" and fields["bodyCrc32"] == "5" and fields["compressed"] == "true"
    assert RegisterBrokerRequestHeader.from_fields(fields) == h
