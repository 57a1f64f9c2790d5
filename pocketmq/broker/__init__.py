"""The PocketMQ broker process: store, request processors, registration with name servers.

``BrokerController`` (:mod:`broker.controller`) is the composition root; ``rmq-broker`` (:mod:`pocketmq.broker.main`)
runs one from a RocketMQ-style ``.properties`` file.
"""
