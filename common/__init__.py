"""PocketMQ's model, the ground floor (RocketMQ's ``common`` module): what every process shares.

It imports nothing of PocketMQ's; ``remoting`` and ``store`` stand on it, ``namesrv``, ``client``, ``ha`` and
``spark_jobs`` above them, ``broker`` on top (see the README's architecture section).
"""
