"""The ACLs of the metadata image: what AccessControlEntryRecord / RemoveAccessControlEntryRecord
add up to (Kafka's ``AclsImage`` / ``StandardAcl``).

Invariants:
- ``by_id`` maps each ACL's UUID (the record's ``id``) to its ``StandardAcl``; ``counts``
  counts the ids per distinct ACL, so ``contains`` answers "is this exact ACL present" in O(1)
  (Kafka's controller never writes the same ACL twice, but a log may hold duplicates);
- ``generation`` grows by one on every change, so a reader (the authorizer's cache) can tell
  cheaply whether what it derived is still current;
- a RemoveAccessControlEntryRecord for an unknown id is ignored (logged), as replaying a log
  must never fail on it.

Codes are Kafka's (``org.apache.kafka.common.resource`` / ``acl``): stored as plain ints so
this layer needs nothing from the broker; ``broker.auth.acl`` names them. Owned by the broker's
event loop, like the rest of the image.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from uuid import UUID

from protocol.messages.metadata.access_control_entry_record import AccessControlEntryRecord
from protocol.messages.metadata.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)

__all__ = ["AclImage", "StandardAcl"]

logger = logging.getLogger("samsa.replication.metadata")


@dataclass(frozen=True, slots=True)
class StandardAcl:
    """One ACL binding: a resource pattern and an access control entry (Kafka's codes)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    @classmethod
    def from_record(cls, record: AccessControlEntryRecord) -> StandardAcl:
        return cls(
            resource_type=record.resource_type,
            resource_name=record.resource_name,
            pattern_type=record.pattern_type,
            principal=record.principal,
            host=record.host,
            operation=record.operation,
            permission_type=record.permission_type,
        )

    def to_record(self, acl_id: UUID) -> AccessControlEntryRecord:
        return AccessControlEntryRecord(
            id=acl_id,
            resource_type=self.resource_type,
            resource_name=self.resource_name,
            pattern_type=self.pattern_type,
            principal=self.principal,
            host=self.host,
            operation=self.operation,
            permission_type=self.permission_type,
        )


@dataclass(slots=True)
class AclImage:
    by_id: dict[UUID, StandardAcl] = field(default_factory=dict)
    counts: dict[StandardAcl, int] = field(default_factory=dict)
    generation: int = 0

    def __len__(self) -> int:
        return len(self.by_id)

    def contains(self, acl: StandardAcl) -> bool:
        return acl in self.counts

    def apply(self, record: AccessControlEntryRecord | RemoveAccessControlEntryRecord) -> None:
        if isinstance(record, AccessControlEntryRecord):
            self._add(record.id, StandardAcl.from_record(record))
        else:
            self._remove(record.id)

    def _add(self, acl_id: UUID, acl: StandardAcl) -> None:
        if acl_id in self.by_id:
            self._remove(acl_id)
        self.by_id[acl_id] = acl
        self.counts[acl] = self.counts.get(acl, 0) + 1
        self.generation += 1

    def _remove(self, acl_id: UUID) -> None:
        acl = self.by_id.pop(acl_id, None)
        if acl is None:
            logger.warning("RemoveAccessControlEntryRecord for unknown ACL id %s ignored", acl_id)
            return
        remaining = self.counts[acl] - 1
        if remaining:
            self.counts[acl] = remaining
        else:
            del self.counts[acl]
        self.generation += 1
