"""RocketMQ 4.9's plain ACL on the broker: ``plain_acl.yml`` (:mod:`pocketmq.broker.acl.config`), which resource and
permission each request needs (:mod:`pocketmq.broker.acl.permission`), the validator that runs before every request is
dispatched when ``aclEnable=true`` (:mod:`pocketmq.broker.acl.validator`), and the reload of the file when it changes
(:mod:`pocketmq.broker.acl.service`). Signatures are computed by :mod:`pocketmq.remoting.acl`, shared with the SDK."""

from pocketmq.broker.acl.config import AclConfigError, PlainAclConfig, load_plain_acl
from pocketmq.broker.acl.service import PlainAclService
from pocketmq.broker.acl.validator import AclDenied, PlainAccessValidator

__all__ = ["AclConfigError", "AclDenied", "PlainAccessValidator", "PlainAclConfig", "PlainAclService",
           "load_plain_acl"]
