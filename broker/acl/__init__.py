"""RocketMQ 4.9's plain ACL on the broker: ``plain_acl.yml`` (:mod:`broker.acl.config`), which resource and
permission each request needs (:mod:`broker.acl.permission`), the validator that runs before every request is
dispatched when ``aclEnable=true`` (:mod:`broker.acl.validator`), and the reload of the file when it changes
(:mod:`broker.acl.service`). Signatures are computed by :mod:`remoting.acl`, shared with the SDK."""

from broker.acl.config import AclConfigError, PlainAclConfig, load_plain_acl
from broker.acl.service import PlainAclService
from broker.acl.validator import AclDenied, PlainAccessValidator

__all__ = ["AclConfigError", "AclDenied", "PlainAccessValidator", "PlainAclConfig", "PlainAclService",
           "load_plain_acl"]
