"""Metadata snapshot files: Kafka's names, Kafka's batch layout (cross-checked with kafka-python's
independent RecordBatch reader), damage anywhere is refused, and image -> snapshot -> image
gives the same image for random histories of operations."""

from __future__ import annotations

import copy
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from protocol.codec import Message
from protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicExceptionError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.metadata.access_control_entry_record import AccessControlEntryRecord
from protocol.messages.metadata.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from protocol.messages.metadata.config_record import ConfigRecord
from protocol.messages.metadata.fence_broker_record import FenceBrokerRecord
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from protocol.messages.metadata.producer_ids_record import ProducerIdsRecord
from protocol.messages.metadata.register_broker_record import (
    BrokerEndpoint,
    BrokerFeature,
    RegisterBrokerRecord,
)
from protocol.messages.metadata.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from protocol.messages.metadata.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from protocol.messages.metadata.topic_record import TopicRecord
from protocol.messages.metadata.unfence_broker_record import UnfenceBrokerRecord
from protocol.messages.metadata.unregister_broker_record import UnregisterBrokerRecord
from protocol.messages.metadata.user_scram_credential_record import UserScramCredentialRecord
from protocol.messages.snapshot_header_record import SnapshotHeaderRecord
from protocol.records import decode_batch, iter_batches
from replication.metadata.controller import (
    plan_create_partitions,
    plan_create_topic,
    plan_delete_topic,
)
from replication.metadata.image import (
    BROKER_RESOURCE_TYPE,
    GROUP_RESOURCE_TYPE,
    TOPIC_RESOURCE_TYPE,
    MetadataImage,
)
from replication.metadata.image_records import copy_image, image_records
from replication.metadata.records import encode_metadata_record
from replication.metadata.snapshot import (
    SnapshotError,
    SnapshotId,
    encode_snapshot,
    parse_snapshot_path,
    read_snapshot,
    read_snapshot_timestamp,
    snapshot_file_name,
    write_snapshot,
)
from storage.config import LogConfig

# -- names --------------------------------------------------------------------------------------


def test_file_name_is_kafkas() -> None:
    assert snapshot_file_name(SnapshotId(1234, 7)) == "00000000000000001234-0000000007.checkpoint"


@given(end_offset=st.integers(0, 2**63 - 1), epoch=st.integers(0, 2**31 - 1))
def test_names_parse_back(end_offset: int, epoch: int) -> None:
    snapshot_id = SnapshotId(end_offset, epoch)
    name = snapshot_file_name(snapshot_id)
    parsed = parse_snapshot_path(Path(name))
    assert parsed is not None and parsed.snapshot_id == snapshot_id
    assert not parsed.partial and not parsed.deleted
    stem = name[: -len(".checkpoint")]
    partial = parse_snapshot_path(Path(f"{stem}-{uuid.uuid4().hex}.checkpoint.part"))
    assert partial is not None and partial.partial and partial.snapshot_id == snapshot_id
    deleted = parse_snapshot_path(Path(f"{stem}.checkpoint.deleted"))
    assert deleted is not None and deleted.deleted and deleted.snapshot_id == snapshot_id


@pytest.mark.parametrize("name", [
    "00000000000000000000.log", "00000000000000000005.snapshot", "leader-epoch-checkpoint",
    "recovery-point-offset-checkpoint", "5-1.checkpoint", "00000000000000000005-0000000001.checkpointx",
])
def test_other_files_are_not_snapshots(name: str) -> None:
    assert parse_snapshot_path(Path(name)) is None


# -- layout -------------------------------------------------------------------------------------


def _records(count: int) -> list[Message]:
    return [TopicRecord(name=f"topic-{n}", topic_id=uuid.UUID(int=n + 1)) for n in range(count)]


def _write(directory: Path, records: list[Message], snapshot_id: SnapshotId, **kwargs: int) -> Path:
    values = [encode_metadata_record(record) for record in records]
    batches = encode_snapshot(values, snapshot_id, timestamp_ms=1_700_000_000_123,
                              last_contained_log_timestamp=1_700_000_000_000, **kwargs)
    return write_snapshot(directory, snapshot_id, batches)


def test_layout_matches_kafkas_snapshot_writer(tmp_path: Path) -> None:
    records = _records(5)
    path = _write(tmp_path, records, SnapshotId(42, 3))
    assert path.name == "00000000000000000042-0000000003.checkpoint"
    assert not list(tmp_path.glob("*.part"))
    data = path.read_bytes()
    ours = list(iter_batches(data))
    assert [batch.base_offset for batch in ours] == [0, 1, 6]
    assert [batch.is_control for batch in ours] == [True, False, True]
    # Control keys: version 0, type 3 (SNAPSHOT_HEADER) / 4 (SNAPSHOT_FOOTER).
    assert ours[0].records[0].key == b"\x00\x00\x00\x03"
    assert ours[2].records[0].key == b"\x00\x00\x00\x04"
    header = SnapshotHeaderRecord.decode(ours[0].records[0].value, 0)
    assert header.last_contained_log_timestamp == 1_700_000_000_000
    assert [r.value for r in ours[1].records] == [encode_metadata_record(r) for r in records]
    assert all(r.key is None for r in ours[1].records)
    # kafka-python, an independent reader: CRCs, offsets, control flags, epochs.
    theirs = MemoryRecords(data)
    seen = []
    while (batch := theirs.next_batch()) is not None:
        assert isinstance(batch, DefaultRecordBatch) and batch.validate_crc()
        seen.append((batch.base_offset, batch.is_control_batch, batch.leader_epoch,
                     batch.compression_type, batch.producer_id))
    assert seen == [(0, True, 3, 0, -1), (1, False, 3, 0, -1), (6, True, 3, 0, -1)]
    snapshot = read_snapshot(path)
    assert snapshot.records == tuple(records)
    assert snapshot.snapshot_id == SnapshotId(42, 3)
    assert read_snapshot_timestamp(path) == 1_700_000_000_000


def test_data_batches_are_cut_at_the_batch_size(tmp_path: Path) -> None:
    records = _records(50)
    path = _write(tmp_path, records, SnapshotId(50, 0), max_batch_size_bytes=200)
    batches = list(iter_batches(path.read_bytes()))
    assert len(batches) > 4
    offsets = [record.offset for batch in batches for record in batch.records]
    assert offsets == list(range(52))
    assert read_snapshot(path).records == tuple(records)


def test_an_empty_image_is_header_and_footer(tmp_path: Path) -> None:
    path = _write(tmp_path, [], SnapshotId(1, 0))
    assert [b.base_offset for b in iter_batches(path.read_bytes())] == [0, 1]
    assert read_snapshot(path).records == ()


# -- damage -------------------------------------------------------------------------------------


def test_every_damaged_byte_is_refused(tmp_path: Path) -> None:
    records: list[Message] = [*_records(2),
                              ConfigRecord(resource_type=2, resource_name="t", name="k", value="v")]
    good = _write(tmp_path, records, SnapshotId(9, 1)).read_bytes()
    bad = tmp_path / "00000000000000000009-0000000001.checkpoint"
    for position in range(len(good)):
        for flip in (0x01, 0xFF):
            damaged = bytearray(good)
            damaged[position] ^= flip
            bad.write_bytes(damaged)
            with pytest.raises(SnapshotError) as caught:
                read_snapshot(bad)
            assert caught.value.path == bad


def test_every_truncation_is_refused(tmp_path: Path) -> None:
    good = _write(tmp_path, _records(3), SnapshotId(4, 0)).read_bytes()
    bad = tmp_path / "00000000000000000004-0000000000.checkpoint"
    for length in range(len(good)):
        bad.write_bytes(good[:length])
        with pytest.raises(SnapshotError):
            read_snapshot(bad)


def test_bytes_after_the_footer_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, _records(1), SnapshotId(2, 0))
    first = next(iter_batches(path.read_bytes()))
    path.write_bytes(path.read_bytes() + path.read_bytes()[: first.size_in_bytes])
    with pytest.raises(SnapshotError, match="base offset"):
        read_snapshot(path)


def test_an_epoch_other_than_the_names_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, _records(1), SnapshotId(2, 5))
    other = tmp_path / snapshot_file_name(SnapshotId(2, 6))
    other.write_bytes(path.read_bytes())
    with pytest.raises(SnapshotError, match="epoch"):
        read_snapshot(other)


def test_a_failed_write_leaves_no_part_file(tmp_path: Path) -> None:
    def failing() -> list[bytes]:
        raise OSError("disk full")

    def batches():  # type: ignore[no-untyped-def]
        yield b"x"
        failing()

    with pytest.raises(OSError):
        write_snapshot(tmp_path, SnapshotId(1, 0), batches())
    assert list(tmp_path.iterdir()) == []


# -- image -> records -> image ------------------------------------------------------------------

NAMES = ["a", "b", "c.d", "c_d", "e_f"]  # c.d and c_d collide, as in Kafka
GROUPS = ["g1", "g2"]
USERS = ["alice", "bob"]
ACL_IDS = [uuid.UUID(int=n) for n in range(1, 5)]
BROKERS = [1, 2, 3]

topic_operations = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(NAMES), st.integers(1, 3),
              st.dictionaries(st.sampled_from(["retention.ms", "cleanup.policy"]),
                              st.sampled_from(["1000", "compact"]), max_size=2)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("grow"), st.sampled_from(NAMES), st.integers(0, 5)),
)
other_operations = st.one_of(
    st.tuples(st.just("config"), st.sampled_from([TOPIC_RESOURCE_TYPE, BROKER_RESOURCE_TYPE,
                                                  GROUP_RESOURCE_TYPE]),
              st.sampled_from(["", "1", *NAMES[:2], *GROUPS]), st.sampled_from(["k1", "k2"]),
              st.one_of(st.none(), st.sampled_from(["x", "y"]))),
    st.tuples(st.just("producer_ids"), st.integers(0, 5000)),
    st.tuples(st.just("acl"), st.sampled_from(ACL_IDS), st.sampled_from(["User:a", "User:b"]),
              st.integers(2, 4)),
    st.tuples(st.just("unacl"), st.sampled_from(ACL_IDS)),
    st.tuples(st.just("scram"), st.sampled_from(USERS), st.sampled_from([1, 2]), st.binary(max_size=8)),
    st.tuples(st.just("unscram"), st.sampled_from(USERS), st.sampled_from([1, 2])),
    st.tuples(st.just("register"), st.sampled_from(BROKERS), st.integers(0, 2),
              st.sampled_from([None, "", "rack-a"]), st.booleans(), st.booleans()),
    st.tuples(st.just("broker_change"), st.sampled_from(BROKERS), st.sampled_from([-1, 0, 1]),
              st.sampled_from([0, 1])),
    st.tuples(st.just("fence"), st.sampled_from(BROKERS), st.booleans()),
    st.tuples(st.just("unregister"), st.sampled_from(BROKERS)),
    st.tuples(st.just("partition_change"), st.sampled_from(NAMES), st.integers(0, 2),
              st.sampled_from([-2, -1, 1, 2]),
              st.one_of(st.none(), st.lists(st.sampled_from(BROKERS), max_size=3, unique=True)),
              st.one_of(st.none(), st.lists(st.sampled_from(BROKERS), max_size=2, unique=True)),
              st.sampled_from([-1, 0, 1]),
              st.one_of(st.none(), st.lists(st.sampled_from(BROKERS), max_size=2, unique=True))),
)
# Half topic operations: drawn one kind in nine, a topic would rarely live long enough for
# deletes, growth and name collisions to be accepted or refused on their merits.
operations = st.booleans().flatmap(lambda topic: topic_operations if topic else other_operations)


# The values of ``operations`` that LogConfig refuses (a policy that is not one, a time that is
# not a number); Kafka answers INVALID_CONFIG.
INVALID_CONFIGS = {("retention.ms", "compact"), ("cleanup.policy", "1000")}


def expected_refusal(image: MetadataImage, operation: tuple) -> type[Exception] | None:
    """The error the controller must raise on purpose for ``operation`` (Kafka's checks, in
    Kafka's order), or None when the operation is accepted."""
    kind, *args = operation
    topic = image.topics_by_name.get(args[0]) if kind in ("create", "delete", "grow") else None
    if kind == "create":
        name, configs = args[0], args[2]
        if topic is not None:
            return TopicAlreadyExistsError
        if any(name.replace(".", "_") == other.replace(".", "_") for other in image.topics_by_name):
            return InvalidTopicExceptionError
        if not can_place(image, 1):
            return InvalidReplicationFactorError
        if any(item in INVALID_CONFIGS for item in configs.items()):
            return InvalidConfigError
    elif kind in ("delete", "grow") and topic is None:
        return UnknownTopicOrPartitionError
    elif kind == "grow" and args[1] == 0:
        return InvalidPartitionsError  # the same count is no increase
    elif kind == "grow" and topic is not None and not can_place(image, len(topic.partitions[0].replicas)):
        return InvalidReplicationFactorError
    return None


def can_place(image: MetadataImage, factor: int) -> bool:
    """Whether ``factor`` replicas can be placed: always on a node without registrations;
    with them, some usable broker (not in controlled shutdown) must be unfenced and there must
    be ``factor`` usable brokers."""
    if not len(image.brokers):
        return True
    usable = [b for b in image.brokers.by_id.values() if not b.in_controlled_shutdown]
    return any(not b.fenced for b in usable) and factor <= len(usable)


def records_of(image: MetadataImage, operation: tuple) -> list[Message]:  # type: ignore[type-arg]
    """The records one operation writes, planned against ``image`` as the broker plans them.
    A refusal the model expects writes nothing, and must be that refusal exactly; any other
    error from planning fails the test."""
    refusal = expected_refusal(image, operation)
    if refusal is None:
        return _planned_records(image, operation)
    with pytest.raises(refusal) as caught:
        _planned_records(image, operation)
    assert type(caught.value) is refusal, caught.value
    return []


def _planned_records(image: MetadataImage, operation: tuple) -> list[Message]:
    kind, *args = operation
    if kind == "create":
        return list(plan_create_topic(
            image, args[0], num_partitions=args[1], replication_factor=-1, configs=args[2],
            node_id=1, default_num_partitions=1, default_replication_factor=1,
            default_config=LogConfig()).records)
    if kind == "delete":
        return list(plan_delete_topic(image, name=args[0])[1])
    if kind == "grow":
        topic = image.topics_by_name.get(args[0])
        count = (len(topic.partitions) if topic else 0) + args[1]
        return list(plan_create_partitions(image, args[0], count, assignments=None, node_id=1)[1])
    return _direct_records(kind, args, image)


def _direct_records(kind: str, args: list, image: MetadataImage) -> list[Message]:  # type: ignore[type-arg]
    if kind in ("register", "broker_change", "fence", "unregister"):
        return _broker_records(kind, args, image)
    if kind == "partition_change":
        return _partition_change(args, image)
    if kind == "config":
        return [ConfigRecord(resource_type=args[0], resource_name=args[1], name=args[2], value=args[3])]
    if kind == "producer_ids":
        return [ProducerIdsRecord(broker_id=1, broker_epoch=-1, next_producer_id=args[0])]
    if kind == "acl":
        return [AccessControlEntryRecord(id=args[0], resource_type=2, resource_name="t",
                                         pattern_type=3, principal=args[1], host="*",
                                         operation=args[2], permission_type=3)]
    if kind == "unacl":
        return [RemoveAccessControlEntryRecord(id=args[0])]
    if kind == "scram":
        return [UserScramCredentialRecord(name=args[0], mechanism=args[1], salt=args[2],
                                          stored_key=b"s" * 32, server_key=b"k" * 32,
                                          iterations=4096 + len(args[2]))]
    return [RemoveUserScramCredentialRecord(name=args[0], mechanism=args[1])]


def _broker_records(kind: str, args: list, image: MetadataImage) -> list[Message]:  # type: ignore[type-arg]
    """Broker records with the registered epoch (an unregistered broker: epoch 5, ignored)."""
    broker_id = args[0]
    registration = image.brokers.get(broker_id)
    epoch = registration.epoch if registration is not None else 5
    if kind == "register":
        return [RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=uuid.UUID(int=100 + args[1]),
            broker_epoch=len(image.brokers) * 10 + args[1], rack=args[2], fenced=args[3],
            in_controlled_shutdown=args[4],
            end_points=[BrokerEndpoint("PLAINTEXT", f"b{broker_id}", 9092, 0)],
            features=[BrokerFeature("metadata.version", 1, 21)])]
    if kind == "broker_change":
        return [BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch,
                                               fenced=args[1], in_controlled_shutdown=args[2])]
    if kind == "fence":
        record_type = FenceBrokerRecord if args[1] else UnfenceBrokerRecord
        return [record_type(id=broker_id, epoch=epoch)]
    return [UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch)]


def _partition_change(args: list, image: MetadataImage) -> list[Message]:  # type: ignore[type-arg]
    name, index, leader, isr, adding, recovery, elr = args
    topic = image.topics_by_name.get(name)
    if topic is None or index not in topic.partitions:
        return []
    return [PartitionChangeRecord(
        partition_id=index, topic_id=topic.topic_id, leader=leader, isr=isr,
        replicas=None if adding is None else [*adding, 1], adding_replicas=adding,
        removing_replicas=None if adding is None else [], leader_recovery_state=recovery,
        eligible_leader_replicas=elr)]


def state(image: MetadataImage) -> tuple:  # type: ignore[type-arg]
    """All of an image but its history counters (ACL generation, last offset)."""
    return (
        {name: (t.topic_id, t.partitions) for name, t in image.topics_by_name.items()},
        {topic_id: t.name for topic_id, t in image.topics_by_id.items()},
        image.topic_configs, image.broker_configs, image.group_configs, image.next_producer_id,
        image.acls.by_id, image.acls.counts, image.scram.by_user, image.brokers.by_id,
    )


def build(history: list[tuple]) -> MetadataImage:  # type: ignore[type-arg]
    image = MetadataImage()
    for operation in history:
        for record in records_of(image, operation):
            image.apply(record)
    return image


@settings(max_examples=150, deadline=None)
@given(history=st.lists(operations, max_size=30))
def test_image_to_snapshot_to_image_is_the_same_image(history: list[tuple]) -> None:  # type: ignore[type-arg]
    image = build(history)
    copy = copy_image(image)
    with tempfile.TemporaryDirectory() as directory:
        path = _write(Path(directory), list(image_records(copy)), SnapshotId(10, 0),
                      max_batch_size_bytes=300)
        again = MetadataImage()
        for record in read_snapshot(path).records:
            again.apply(record)
    assert state(again) == state(image)
    assert len(again.acls) == len(image.acls)


@settings(max_examples=50, deadline=None)
@given(history=st.lists(operations, min_size=1, max_size=20), more=st.lists(operations, max_size=10))
def test_a_copy_does_not_see_later_changes(history: list[tuple], more: list[tuple]) -> None:  # type: ignore[type-arg]
    image = build(history)
    frozen = state(copy_image(image))
    expected = copy.deepcopy(state(image))
    for operation in more:
        for record in records_of(image, operation):
            image.apply(record)
    assert frozen == expected


def test_batches_decode_with_the_snapshot_epoch(tmp_path: Path) -> None:
    path = _write(tmp_path, _records(2), SnapshotId(3, 9))
    batch = decode_batch(path.read_bytes())
    assert batch.header.partition_leader_epoch == 9
