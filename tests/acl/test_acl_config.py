"""plain_acl.yml parsing, address patterns and permission rules (pocketmq.remoting.plain_acl)."""

from __future__ import annotations

import pytest

from pocketmq.remoting.plain_acl.config import AclConfigError, AddressMatcher, load_plain_acl
from pocketmq.remoting.plain_acl.permission import ANY, DENY, PUB, SUB, check_permission, parse_perm

# RocketMQ 4.9.7's distribution/conf/plain_acl.yml, as shipped.
SAMPLE = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def test_rocketmq_sample_file() -> None:
    config = load_plain_acl(SAMPLE)
    assert [w.matches("10.10.103.7") for w in config.global_white_remote_addresses] == [True, False]
    rocketmq = config.accounts["RocketMQ"]
    assert rocketmq.secret_key == "12345678"  # a YAML number, read as text
    assert not rocketmq.admin and rocketmq.default_topic_perm == DENY and rocketmq.default_group_perm == SUB
    assert rocketmq.perms == {"topicA": DENY, "topicB": PUB | SUB, "topicC": SUB, "%RETRY%groupA": DENY,
                              "%RETRY%groupB": PUB | SUB, "%RETRY%groupC": SUB}
    assert not rocketmq.white_remote_address.matches("127.0.0.1")  # blank matches nobody
    admin = config.accounts["rocketmq2"]
    assert admin.admin and admin.white_remote_address.matches("192.168.1.77")
    assert "12345678" not in repr(admin)


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("192.168.1.*", ["192.168.1.0", "192.168.1.255"], ["192.168.2.1"]),
        ("192.168.*", ["192.168.9.9"], ["192.169.0.1"]),
        ("10.0.1.1-100", ["10.0.1.1", "10.0.1.100"], ["10.0.1.101", "10.0.2.50"]),
        ("192.168.0.{1,2}", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3"]),
        ("1.1.1.1,2.2.2.2", ["2.2.2.2"], ["3.3.3.3"]),
        ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
        ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
        ("", [], ["127.0.0.1"]),
    ],
)
def test_address_patterns(pattern: str, yes: list[str], no: list[str]) -> None:
    matcher = AddressMatcher(pattern)
    assert all(matcher.matches(ip) for ip in yes)
    assert not any(matcher.matches(ip) for ip in no)


def test_permission_rules() -> None:
    assert parse_perm("PUB|SUB") == parse_perm("SUB|PUB") == PUB | SUB
    assert parse_perm(None) == parse_perm("ALL") == DENY
    assert check_permission(PUB, PUB | SUB) and not check_permission(PUB, SUB)
    assert not check_permission(SUB, DENY | SUB)
    assert check_permission(ANY, SUB) and not check_permission(ANY, DENY)


@pytest.mark.parametrize(
    "text",
    [
        "accounts: [{accessKey: short, secretKey: 12345678}]",
        "accounts: [{accessKey: longEnough, secretKey: tiny}]",
        "accounts: [{accessKey: longEnough, secretKey: 12345678, topicPerms: [topicA]}]",
        "accounts: [{accessKey: longEnough, secretKey: 12345678, groupPerms: [g=ALL]}]",
        "accounts: [{accessKey: longEnough, secretKey: 12345678}, {accessKey: longEnough, secretKey: 87654321}]",
        "accounts: {accessKey: x}",
        "globalWhiteRemoteAddresses: [10.0.0.300-400]",
        "[1, 2",
    ],
)
def test_invalid_files_are_named_errors_without_secrets(text: str) -> None:
    with pytest.raises(AclConfigError) as info:
        load_plain_acl(text)
    assert "12345678" not in str(info.value) and "87654321" not in str(info.value)


def test_empty_file_is_an_empty_config() -> None:
    assert not load_plain_acl("").accounts


def test_shipped_sample_parses_and_whitelists_nothing() -> None:
    from pocketmq.conf import example_acl

    config = load_plain_acl(example_acl().read_text())
    assert set(config.accounts) == {"orderService", "operator"}
    assert config.accounts["operator"].admin
    assert not config.global_white_remote_addresses


@pytest.mark.parametrize(
    "body",
    [b'{"consumerDataSet": 5}', b'{"consumerDataSet": [{"groupName": 1, "subscriptionDataSet": 7}]}',
     b'{"consumerDataSet": [{"groupName": "G", "subscriptionDataSet": [{"topic": "T"}, 3]}]}', b"[]", b"null"],
)
def test_odd_heartbeat_bodies_name_what_they_can(body: bytes) -> None:
    from pocketmq.remoting.codes import RequestCode
    from pocketmq.remoting.command import RemotingCommand
    from pocketmq.remoting.plain_acl.permission import required_resources

    needs = required_resources(RemotingCommand.request(RequestCode.HEART_BEAT, None, body))
    assert needs in ({}, {"%RETRY%G": SUB, "T": SUB})


def test_a_recall_needs_the_topics_pub() -> None:
    from pocketmq.remoting.codes import RequestCode
    from pocketmq.remoting.command import RemotingCommand
    from pocketmq.remoting.plain_acl.permission import required_resources

    fields = {"producerGroup": "PG", "topic": "TRecall", "recallHandle": "h", "brokerName": "broker-a"}
    assert required_resources(RemotingCommand.request(RequestCode.RECALL_MESSAGE, fields)) == {"TRecall": PUB}
