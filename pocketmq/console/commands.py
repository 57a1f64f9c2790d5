"""The ``rmq-admin`` command line that does (or shows) the same as a console page or action.

Arguments are shell-quoted. Credentials never appear: with ACL on the line reminds the reader that
``rmq-admin`` takes its keys from ``POCKETMQ_ACCESS_KEY`` / ``POCKETMQ_SECRET_KEY``.
"""

from __future__ import annotations

import shlex


class AdminCommands:
    """Builds command lines for one console (its name servers and whether it signs requests)."""

    def __init__(self, namesrv_addr: str, *, acl: bool) -> None:
        self.namesrv_addr = namesrv_addr
        self.acl = acl

    def line(self, command: str, *args: object) -> str:
        parts = ["rmq-admin", command, "-n", self.namesrv_addr, *(str(a) for a in args if a is not None)]
        text = " ".join(shlex.quote(p) for p in parts)
        return ("POCKETMQ_ACCESS_KEY=… POCKETMQ_SECRET_KEY=… " + text) if self.acl else text

    # Each method names the rmq-admin command it stands for; flags are mqadmin's.

    def cluster_list(self) -> str:
        return self.line("clusterList")

    def broker_status(self, addr: str) -> str:
        return self.line("brokerStatus", "-b", addr)

    def topic_list(self) -> str:
        return self.line("topicList")

    def topic_route(self, topic: str) -> str:
        return self.line("topicRoute", "-t", topic)

    def topic_status(self, topic: str) -> str:
        return self.line("topicStatus", "-t", topic)

    def update_topic(self, topic: str, read: int, write: int, perm: int, order: bool, cluster: str | None) -> str:
        return self.line("updateTopic", "-t", topic, *(("-c", cluster) if cluster else ()), "-r", read, "-w", write,
                         "-p", perm, *(("-o",) if order else ()))

    def delete_topic(self, topic: str, cluster: str | None) -> str:
        return self.line("deleteTopic", "-t", topic, *(("-c", cluster) if cluster else ()))

    def send_message(self, topic: str, body: str, keys: str, tags: str) -> str:
        return self.line("sendMessage", "-t", topic, "-p", body, *(("-k", keys) if keys else ()),
                         *(("--tags", tags) if tags else ()))

    def stats_all(self, topic: str) -> str:
        return self.line("statsAll", "-t", topic)

    def sub_group_list(self) -> str:
        return self.line("subGroupList")

    def consumer_progress(self, group: str) -> str:
        return self.line("consumerProgress", "-g", group)

    def consumer_connection(self, group: str) -> str:
        return self.line("consumerConnection", "-g", group)

    def reset_offset(self, group: str, topic: str, timestamp: int) -> str:
        return self.line("resetOffsetByTime", "-g", group, "-t", topic, "-s", timestamp)

    def skip_accumulated(self, group: str, topic: str) -> str:
        return self.line("skipAccumulatedMessage", "-g", group, "-t", topic)

    def print_range(self, topic: str, begin_ms: int, end_ms: int) -> str:
        return self.line("printMsg", "-t", topic, "-b", begin_ms, "-e", end_ms + 1)

    def query_by_key(self, topic: str, key: str, begin_ms: int | None, end_ms: int | None) -> str:
        return self.line("queryMsgByKey", "-t", topic, "-k", key, *(("--begin", begin_ms) if begin_ms else ()),
                         *(("--end", end_ms) if end_ms else ()))

    def query_by_id(self, msg_id: str, topic: str | None) -> str:
        return self.line("queryMsgById", "-i", msg_id, *(("-t", topic) if topic else ()), "--body")

    def trace(self, msg_id: str) -> str:
        return self.line("queryMsgTraceById", "-i", msg_id)

    def resend(self, group: str, msg_id: str, topic: str) -> str:
        return self.line("resendMessage", "-g", group, "-i", msg_id, "-t", topic)

    def dlq_print(self, group: str) -> str:
        return self.line("printMsg", "-t", f"%DLQ%{group}", "--json")

    def tx_pending(self) -> str:
        return self.line("txPending")
