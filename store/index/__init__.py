"""RocketMQ 4.9's message index: the index files (:mod:`store.index.file`) and the service that builds,
flushes, recovers, deletes and queries them (:mod:`store.index.service`)."""

from store.index.file import IndexFile, key_hash
from store.index.service import IndexService, QueryResult

__all__ = ["IndexFile", "IndexService", "QueryResult", "key_hash"]
