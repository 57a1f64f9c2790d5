"""PocketMQ's model, the ground floor (RocketMQ's ``common`` module): what every process shares.

It imports nothing of PocketMQ's; ``remoting`` and ``store`` stand on it, ``namesrv``, ``client``, ``ha`` and
``spark_jobs`` above them, ``broker`` on top (see the README's architecture section).

* :mod:`common.record` — the commit-log record codec (one decoder for recovery, the slave, the SDK's pulls
  and the Spark reader), hosts and offset message ids; :mod:`common.record_encoder` — writing records;
  :mod:`common.batch` — the batch body;
* :mod:`common.message` — ``MessageConst`` property keys, the properties string, ``java_string_hash`` and
  tag codes; :mod:`common.sysflag` — ``MessageSysFlag`` and ``PullSysFlag``;
* :mod:`common.topic` — topic rules and system topics (``TopicValidator``), retry and DLQ topics;
* :mod:`common.subscription` — ``SubscriptionData`` and tag expressions; :mod:`common.consumer` — the
  heartbeat's ``MessageModel``, ``ConsumeType`` and ``ConsumeFromWhere``;
* :mod:`common.topic_config` — ``TopicConfig``, ``PermName``, ``TopicFilterType``, ``DataVersion``;
* :mod:`common.errors` — the format errors; :mod:`common.fields` — tolerant readers of decoded JSON;
* :mod:`common.service`, :mod:`common.logs`, :mod:`common.files` — the ``Service`` base, logging, atomic writes.
* :mod:`common.compiled` — whether the hot path runs compiled (Cython) or from source; imported first.
"""

import common.compiled  # noqa: F401  (first: it picks compiled or source modules, see common.compiled)
