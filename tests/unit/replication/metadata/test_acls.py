"""The ACL image: AccessControlEntryRecord / RemoveAccessControlEntryRecord applied in log order,
against a dict model, and the same ACLs after a replay of the metadata log (a restart)."""

from __future__ import annotations

import uuid
from pathlib import Path
from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.messages.metadata.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from replication.metadata.acls import AclImage, StandardAcl
from replication.metadata.image import MetadataImage
from replication.metadata.log import MetadataLog
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log

IDS = [UUID(int=n) for n in range(1, 6)]
acls = st.builds(
    StandardAcl,
    resource_type=st.sampled_from([2, 3]),
    resource_name=st.sampled_from(["a", "b"]),
    pattern_type=st.sampled_from([3, 4]),
    principal=st.just("User:x"),
    host=st.just("*"),
    operation=st.sampled_from([3, 4]),
    permission_type=st.sampled_from([2, 3]),
)
steps = st.lists(st.tuples(st.sampled_from(IDS), st.one_of(st.none(), acls)), max_size=20)


@settings(max_examples=200, deadline=None)
@given(steps=steps)
def test_image_matches_a_dict_model(steps: list[tuple[UUID, StandardAcl | None]]) -> None:
    image = AclImage()
    model: dict[UUID, StandardAcl] = {}
    generation = image.generation
    for acl_id, acl in steps:
        if acl is None:
            image.apply(RemoveAccessControlEntryRecord(id=acl_id))
            changed = model.pop(acl_id, None) is not None
        else:
            image.apply(acl.to_record(acl_id))
            model[acl_id] = acl
            changed = True
        assert image.by_id == model
        assert all(image.contains(a) for a in model.values())
        assert set(image.counts) == set(model.values())
        assert (image.generation > generation) == changed
        generation = image.generation


def test_metadata_image_dispatches_acl_records() -> None:
    image = MetadataImage()
    acl = StandardAcl(2, "t", 3, "User:x", "*", 3, 3)
    acl_id = uuid.uuid4()
    image.apply(acl.to_record(acl_id), offset=4)
    assert image.acls.by_id == {acl_id: acl} and image.last_offset == 4
    image.apply(RemoveAccessControlEntryRecord(id=acl_id), offset=5)
    assert len(image.acls) == 0


def test_acls_survive_a_replay(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "__cluster_metadata-0", LogConfig(), clock=clock)
    metadata = MetadataLog(log, clock=clock)
    metadata.replay()
    kept = StandardAcl(2, "t", 4, "User:x", "*", 4, 2)
    dropped = StandardAcl(3, "g", 3, "User:y", "10.0.0.1", 3, 3)
    dropped_id = uuid.uuid4()
    metadata.append([kept.to_record(uuid.uuid4()), dropped.to_record(dropped_id)])
    metadata.append([RemoveAccessControlEntryRecord(id=dropped_id)])
    log.close()

    reopened = MetadataLog(Log.open(tmp_path / "__cluster_metadata-0", LogConfig(), clock=clock),
                           clock=clock)
    image = reopened.replay()
    assert list(image.acls.by_id.values()) == [kept]
    assert not image.acls.contains(dropped)
