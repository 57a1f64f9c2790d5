"""The name server: a stateless registry of brokers and topic routes.

* :mod:`pocketmq.namesrv.routeinfo` — :class:`RouteInfoManager`, the routing tables and their rules;
* :mod:`pocketmq.namesrv.kvconfig` — :class:`KVConfigManager`, namespaced key/value settings kept on disk.
"""
