"""The ACL model, as the broker's handlers and authorizer name it: every name of
``replication.metadata.acl_model`` (where the controller validates ACLs with it), re-exported."""

from replication.metadata.acl_model import *  # noqa: F403
