"""RocketMQ 5's gRPC endpoint (``apache.rocketmq.v2.MessagingService``) for PocketMQ: ``rmq-proxy``
(:mod:`pocketmq.proxy.main`), or served in a broker's process (``enableGrpcProxy``). It is a client of the name
servers and brokers over remoting, beside the broker on the composition floor; it never imports the broker.
User guide: docs/grpc-proxy.md; design: docs/design/grpc.md."""
