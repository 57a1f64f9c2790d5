"""The controller (RocketMQ 5's RIP-44 controller mode): per broker group the master, its epoch, the SyncStateSet and
the replicas, kept on a small Raft so that a dead master is replaced in seconds. It runs inside the name servers
(``enableControllerInNamesrv``) or as ``rmq-controller``. Floor: below the name server, beside it; imports only
``common`` and ``remoting``.
"""
