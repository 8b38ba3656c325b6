"""ACL changes as metadata records: what Kafka's ``AclControlManager`` decides, for one node.

``plan_create_acls`` validates each binding (INVALID_REQUEST with Kafka's message per bad one)
and writes an AccessControlEntryRecord with a fresh UUID for each valid binding not already
present (creating an existing ACL succeeds and writes nothing, as in Kafka).
``plan_delete_acls`` validates each filter (INVALID_REQUEST for unknown codes) and writes a
RemoveAccessControlEntryRecord per ACL matched by any filter (once, however many filters
match it); each filter's result lists the ACLs it matched.

Sans-IO: both read the image and return records; the controller (``replication.controller``)
proposes them as one batch (so a request's changes apply whole), which applies them to the image.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from protocol.codec import Message
from protocol.errors import KafkaError
from protocol.messages.metadata.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from replication.metadata.acl_model import AclBindingFilter, validate_filter, validate_new_acl
from replication.metadata.acls import AclImage, StandardAcl

__all__ = ["DeleteResult", "plan_create_acls", "plan_delete_acls"]


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """One filter's outcome: the ACLs it matched, or the error that rejected it."""

    matched: tuple[StandardAcl, ...] = ()
    error: KafkaError | None = None


def plan_create_acls(
    image: AclImage, acls: Sequence[StandardAcl]
) -> tuple[list[KafkaError | None], list[Message]]:
    """Per binding: None (created or already present) or its error; and the records to write."""
    results: list[KafkaError | None] = []
    records: list[Message] = []
    planned: set[StandardAcl] = set()
    for acl in acls:
        try:
            validate_new_acl(acl)
        except KafkaError as error:
            results.append(error)
            continue
        if not image.contains(acl) and acl not in planned:
            planned.add(acl)
            records.append(acl.to_record(_new_id(image)))
        results.append(None)
    return results, records


def _new_id(image: AclImage) -> UUID:
    while True:
        acl_id = uuid.uuid4()
        if acl_id not in image.by_id:
            return acl_id


def plan_delete_acls(
    image: AclImage, filters: Sequence[AclBindingFilter]
) -> tuple[list[DeleteResult], list[Message]]:
    results: list[DeleteResult] = []
    removed: dict[UUID, None] = {}  # insertion-ordered set of ids
    for acl_filter in filters:
        try:
            validate_filter(acl_filter)
        except KafkaError as error:
            results.append(DeleteResult(error=error))
            continue
        matched = [(acl_id, acl) for acl_id, acl in image.by_id.items() if acl_filter.matches(acl)]
        removed.update((acl_id, None) for acl_id, _ in matched)
        results.append(DeleteResult(matched=tuple(acl for _, acl in matched)))
    records: list[Message] = [RemoveAccessControlEntryRecord(id=acl_id) for acl_id in removed]
    return results, records
