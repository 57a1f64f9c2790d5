"""The message classes of ``apache.rocketmq.v2`` (apache/rocketmq-apis, Apache-2.0): ``definition_pb2`` and
``service_pb2``, generated from the protos vendored under ``proto/`` by ``scripts/gen_protos.py`` and committed
with their ``.pyi`` stubs (docs/design/grpc.md explains the choice). Do not edit them by hand."""
