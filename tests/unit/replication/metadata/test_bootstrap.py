"""Kafka's ``bootstrap.checkpoint`` (``replication.metadata.bootstrap``) and the first leader of
an empty metadata log writing its records (single node: ``LocalController``; KRaft: the
``QuorumController`` when it first becomes active).

``data/kafka-4.3.1-bootstrap.checkpoint`` was written by Apache Kafka 4.3.1's own
``kafka-storage format -t MkU3OEVBNTcwNTJENDM2Qk -c <combined-mode config>
--add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]'
--add-scram 'SCRAM-SHA-256=[name=bob,password=bobpw,iterations=8192]'``.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.messages.metadata.feature_level_record import FeatureLevelRecord
from protocol.messages.metadata.topic_record import TopicRecord
from protocol.messages.metadata.user_scram_credential_record import UserScramCredentialRecord
from replication.controller.interface import NewTopic
from replication.metadata.bootstrap import (
    BOOTSTRAP_FILE,
    BootstrapError,
    BootstrapMetadata,
    read_bootstrap,
    write_bootstrap,
)
from replication.metadata.image import METADATA_VERSION, MetadataImage
from replication.metadata.scram import MECHANISM_HASHES, client_key, stored_key
from storage.clock import ManualClock
from tests.unit.replication.controller.node import Node
from tests.unit.replication.controller.quorum_node import CLUSTER_ID, QuorumNode

KAFKA_FILE = Path(__file__).parent / "data" / "kafka-4.3.1-bootstrap.checkpoint"
KAFKA_FEATURES = {"metadata.version": 30, "eligible.leader.replicas.version": 1,
                  "group.version": 1, "share.version": 1, "streams.version": 1,
                  "transaction.version": 2}  # Kafka 4.3.1's defaults for a new cluster
USERS = {("alice", 2): ("alice-secret", 4096), ("bob", 1): ("bobpw", 8192)}


def _kafka_directory(tmp_path: Path) -> Path:
    shutil.copy(KAFKA_FILE, tmp_path / BOOTSTRAP_FILE)
    return tmp_path


def _password_matches(image: MetadataImage, user: str, mechanism: int, password: str) -> bool:
    credential = image.scram.get(user, mechanism)
    assert credential is not None, (user, mechanism)
    hash_name = MECHANISM_HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), credential.salt,
                                 credential.iterations)
    return stored_key(hash_name, client_key(hash_name, salted)) == credential.stored_key


def test_the_file_kafka_storage_writes_is_read_whole(tmp_path: Path) -> None:
    bootstrap = read_bootstrap(_kafka_directory(tmp_path))
    assert bootstrap is not None
    assert bootstrap.metadata_version == 30
    features = [r for r in bootstrap.records if isinstance(r, FeatureLevelRecord)]
    assert features[0].name == METADATA_VERSION  # Kafka's order: metadata.version first
    assert {r.name: r.feature_level for r in features} == KAFKA_FEATURES
    users = [(r.name, r.mechanism, r.iterations) for r in bootstrap.records
             if isinstance(r, UserScramCredentialRecord)]
    assert users == [("alice", 2, 4096), ("bob", 1, 8192)]
    assert str(tmp_path / BOOTSTRAP_FILE) in bootstrap.source


def test_applied_records_give_the_image_kafkas_features_and_scram_users(tmp_path: Path) -> None:
    bootstrap = read_bootstrap(_kafka_directory(tmp_path))
    assert bootstrap is not None
    image = MetadataImage()
    for offset, record in enumerate(bootstrap.records):
        image.apply(record, offset)
    assert image.features == KAFKA_FEATURES
    for (user, mechanism), (password, iterations) in USERS.items():
        assert _password_matches(image, user, mechanism, password)
        assert not _password_matches(image, user, mechanism, password + "x")
        credential = image.scram.get(user, mechanism)
        assert credential is not None and credential.iterations == iterations


def test_no_file_is_none(tmp_path: Path) -> None:
    assert read_bootstrap(tmp_path) is None


@pytest.mark.parametrize("cut", [0, 1, 60, 100, 500, -1])
def test_a_damaged_file_is_an_error_naming_it(tmp_path: Path, cut: int) -> None:
    data = KAFKA_FILE.read_bytes()
    (tmp_path / BOOTSTRAP_FILE).write_bytes(data[:cut])
    with pytest.raises(BootstrapError, match=re.escape(f"{tmp_path / BOOTSTRAP_FILE} is damaged")):
        read_bootstrap(tmp_path)


@settings(max_examples=25, deadline=None)
@given(position=st.integers(0, KAFKA_FILE.stat().st_size - 1), bit=st.integers(0, 7))
def test_any_flipped_bit_is_refused(tmp_path_factory: pytest.TempPathFactory, position: int,
                                    bit: int) -> None:
    directory = tmp_path_factory.mktemp("flipped")
    data = bytearray(KAFKA_FILE.read_bytes())
    data[position] ^= 1 << bit
    (directory / BOOTSTRAP_FILE).write_bytes(bytes(data))
    with pytest.raises(BootstrapError):
        read_bootstrap(directory)


def test_records_without_metadata_version_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BootstrapError, match=r"No FeatureLevelRecord for metadata\.version"):
        BootstrapMetadata((FeatureLevelRecord(name="group.version", feature_level=1),), "test")
    with pytest.raises(BootstrapError):
        write_bootstrap(tmp_path, [], now_ms=0)
    assert not (tmp_path / BOOTSTRAP_FILE).exists()


@settings(max_examples=20, deadline=None)
@given(levels=st.dictionaries(st.sampled_from(sorted(KAFKA_FEATURES)), st.integers(1, 100),
                              min_size=1),
       users=st.lists(st.text("abcdefgh", min_size=1, max_size=8), max_size=4, unique=True))
def test_what_samsa_writes_is_read_back(tmp_path_factory: pytest.TempPathFactory,
                                        levels: dict[str, int], users: list[str]) -> None:
    records = [FeatureLevelRecord(name=METADATA_VERSION, feature_level=levels.get(METADATA_VERSION, 25)),
               *(FeatureLevelRecord(name=n, feature_level=v) for n, v in sorted(levels.items())
                 if n != METADATA_VERSION),
               *(UserScramCredentialRecord(name=u, mechanism=1, salt=b"s", stored_key=b"k",
                                           server_key=b"v", iterations=4096) for u in users)]
    directory = tmp_path_factory.mktemp("written")
    write_bootstrap(directory, records, now_ms=1234)
    bootstrap = read_bootstrap(directory)
    assert bootstrap is not None and list(bootstrap.records) == records
    assert sorted(p.name for p in directory.iterdir()) == [BOOTSTRAP_FILE]


# -- the first leader of an empty metadata log ----------------------------------------------


def test_a_single_node_opens_an_empty_metadata_log_with_the_bootstrap_records(
        tmp_path: Path) -> None:
    bootstrap = read_bootstrap(_kafka_directory(tmp_path))
    node = Node.start(tmp_path, ManualClock(1000))
    try:
        node.controller.write_bootstrap(bootstrap)
        image = node.controller.image
        assert image.features == KAFKA_FEATURES
        assert _password_matches(image, "alice", 2, "alice-secret")
        assert image.last_offset == len(bootstrap.records) - 1  # type: ignore[union-attr]
        node.controller.create_topics([NewTopic("t")])[0].result()
        written = image.last_offset
        node.controller.write_bootstrap(bootstrap)  # a log with records is left as it is
        assert image.last_offset == written
    finally:
        node.shutdown()
    restarted = Node.start(tmp_path, ManualClock(2000))  # replayed from the log
    try:
        assert restarted.controller.image.features == KAFKA_FEATURES
        assert _password_matches(restarted.controller.image, "bob", 1, "bobpw")
        assert "t" in restarted.controller.image.topics_by_name
    finally:
        restarted.shutdown()


def test_a_single_node_without_the_file_keeps_samsas_defaults(tmp_path: Path) -> None:
    node = Node.start(tmp_path, ManualClock(1000))
    try:
        node.controller.write_bootstrap(None)
        assert node.controller.image.last_offset == -1
        assert node.controller.image.features == MetadataImage().features
    finally:
        node.shutdown()


def test_the_first_active_controller_writes_them_after_the_cluster_id(tmp_path: Path) -> None:
    bootstrap = read_bootstrap(_kafka_directory(tmp_path))
    node = QuorumNode()
    node.controller.bootstrap = bootstrap
    node.start()
    assert node.image.features == KAFKA_FEATURES
    assert _password_matches(node.image, "alice", 2, "alice-secret")
    assert _password_matches(node.image, "bob", 1, "bobpw")
    assert node.image.cluster_id == CLUSTER_ID  # the cluster id, then the bootstrap records


def test_a_controller_without_the_file_writes_the_images_features() -> None:
    node = QuorumNode().start()
    assert node.image.features == MetadataImage().features
    assert not node.image.scram.by_user


def test_a_controller_over_a_log_with_records_does_not_write_them(tmp_path: Path) -> None:
    bootstrap = read_bootstrap(_kafka_directory(tmp_path))
    node = QuorumNode()
    node.image.apply(TopicRecord(name="old", topic_id=uuid.uuid4()), 0)
    node.controller.bootstrap = bootstrap
    assert node.controller._first_records()[0] == FeatureLevelRecord(
        name=METADATA_VERSION, feature_level=MetadataImage().features[METADATA_VERSION])
    assert not any(isinstance(r, UserScramCredentialRecord)
                   for r in node.controller._first_records())
