"""RocketMQ 4.9's message index: the index files (:mod:`pocketmq.store.index.file`) and the service that builds,
flushes, recovers, deletes and queries them (:mod:`pocketmq.store.index.service`)."""

from pocketmq.store.index.file import IndexFile, key_hash
from pocketmq.store.index.service import IndexService, QueryResult

__all__ = ["IndexFile", "IndexService", "QueryResult", "key_hash"]
