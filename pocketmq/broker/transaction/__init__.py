"""Transactional messages, as RocketMQ 4.9 keeps them (END_TRANSACTION and CHECK_TRANSACTION_STATE).

A prepared send is stored as a *half message* in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its real topic and queue in
``REAL_TOPIC``/``REAL_QID``; END_TRANSACTION commits (the real message is written) or rolls back, and either way an
*op record* in ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (body = the half's queue offset, tag ``d``) marks the half resolved.
Masters check half messages that stay unresolved back with a producer of their group.

* :mod:`pocketmq.broker.transaction.bridge` — the store side: building half, committed, op, copy and discard messages,
  reading the two queues, the progress kept as consumer offsets of ``CID_SYS_RMQ_TRANS``.
* :mod:`pocketmq.broker.transaction.book` — the in-memory op-record bookkeeping (what is resolved, the latest copy of
  each transaction).
* :mod:`pocketmq.broker.transaction.service` — prepare / commit / rollback and the start-up load and repair.
* :mod:`pocketmq.broker.transaction.check` — the check-back service (a periodic service, masters only).
* :mod:`pocketmq.broker.transaction.end` — the END_TRANSACTION processor.
"""
