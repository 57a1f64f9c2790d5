"""RocketMQ 4.9's plain ACL, shared by the broker (remoting requests) and the proxy (gRPC calls): ``plain_acl.yml``
(:mod:`pocketmq.remoting.plain_acl.config`), which resource and permission each request needs
(:mod:`pocketmq.remoting.plain_acl.permission`), the validator that runs before every request is dispatched when
``aclEnable=true`` (:mod:`pocketmq.remoting.plain_acl.validator`), and the reload of the file when it changes
(:mod:`pocketmq.remoting.plain_acl.service`). Signatures are computed by :mod:`pocketmq.remoting.acl`, shared with the
SDK."""

from pocketmq.remoting.plain_acl.config import AclConfigError, PlainAclConfig, load_plain_acl
from pocketmq.remoting.plain_acl.service import PlainAclService
from pocketmq.remoting.plain_acl.validator import AclDenied, PlainAccessValidator

__all__ = ["AclConfigError", "AclDenied", "PlainAccessValidator", "PlainAclConfig", "PlainAclService",
           "load_plain_acl"]
