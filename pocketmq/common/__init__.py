"""PocketMQ's model, the ground floor (RocketMQ's ``common`` module): what every process shares.

It imports nothing of PocketMQ's; ``remoting`` and ``store`` stand on it, ``namesrv``, ``client``, ``ha`` and
``spark_jobs`` above them, ``broker`` on top (see docs/design/floors.md).

* :mod:`pocketmq.common.record` — the commit-log record codec (one decoder for recovery, the slave, the SDK's pulls
  and the Spark reader), hosts and offset message ids; :mod:`pocketmq.common.record_encoder` — writing records;
  :mod:`pocketmq.common.batch` — the batch body;
* :mod:`pocketmq.common.message` — ``MessageConst`` property keys, the properties string, ``java_string_hash`` and
  tag codes; :mod:`pocketmq.common.sysflag` — ``MessageSysFlag`` and ``PullSysFlag``;
* :mod:`pocketmq.common.topic` — topic rules and system topics (``TopicValidator``), retry and DLQ topics;
* :mod:`pocketmq.common.subscription` — ``SubscriptionData`` and tag expressions; :mod:`pocketmq.common.consumer` — the
  heartbeat's ``MessageModel``, ``ConsumeType`` and ``ConsumeFromWhere``;
* :mod:`pocketmq.common.topic_config` — ``TopicConfig``, ``PermName``, ``TopicFilterType``, ``DataVersion``;
* :mod:`pocketmq.common.errors` — the format errors; :mod:`pocketmq.common.fields` — tolerant readers of decoded JSON;
* :mod:`common.service`, :mod:`common.logs`, :mod:`common.files` — the ``Service`` base, logging, atomic writes.
* :mod:`pocketmq.common.compiled` — whether the hot path runs compiled (Cython) or from source; imported first.
"""

