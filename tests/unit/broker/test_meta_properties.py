"""meta.properties: Kafka's v1 layout, the agreement rules between directories, and start-up."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.meta_properties import (
    META_PROPERTIES,
    InconsistentClusterIdError,
    InconsistentNodeIdError,
    MetaProperties,
    MetaPropertiesEnsemble,
    MetaPropertiesError,
    load_cluster_id,
    parse_uuid,
    random_uuid,
    write_cluster_id,
    write_meta_properties,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"  # the id in Kafka's quickstart
OTHER_CLUSTER = "AAAAAAAAAAAAAAAAAAAAAA"
DIRECTORY = "_a4sFRv8QjWFuqUxOyhL0g"


def dirs(tmp_path: Path, count: int) -> tuple[Path, ...]:
    return tuple(tmp_path / f"logs-{index}" for index in range(count))


def read(directory: Path) -> MetaProperties:
    ensemble = MetaPropertiesEnsemble.load([directory])
    return ensemble.log_dir_props[directory]


def test_golden_text() -> None:
    meta = MetaProperties(CLUSTER, 3, DIRECTORY)
    assert meta.to_text() == (
        f"cluster.id={CLUSTER}\ndirectory.id={DIRECTORY}\nnode.id=3\nversion=1\n"
    )
    assert MetaProperties(CLUSTER, 3).to_text() == f"cluster.id={CLUSTER}\nnode.id=3\nversion=1\n"


def test_kafka_written_files_are_read(tmp_path: Path) -> None:
    """The layout kafka-storage.sh format writes (Java's Properties.store: a date comment, any
    key order)."""
    tmp_path.joinpath(META_PROPERTIES).write_text(
        f"#\n#Thu Oct 24 12:00:00 UTC 2024\nnode.id=1\ndirectory.id={DIRECTORY}\nversion=1\n"
        f"cluster.id={CLUSTER}\n")
    assert read(tmp_path) == MetaProperties(CLUSTER, 1, DIRECTORY)


uuids = st.binary(min_size=16, max_size=16).map(
    lambda raw: __import__("base64").urlsafe_b64encode(raw).decode().rstrip("="))


@settings(max_examples=50)
@given(uuids, st.integers(0, 2**31 - 1), st.none() | uuids)
def test_round_trip(tmp_path_factory: pytest.TempPathFactory, cluster_id: str, node_id: int,
                    directory_id: str | None) -> None:
    directory = tmp_path_factory.mktemp("meta")
    meta = MetaProperties(cluster_id, node_id, directory_id)
    write_meta_properties(directory, meta)
    assert read(directory) == meta
    assert not (directory / (META_PROPERTIES + ".tmp")).exists()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("cluster.id=x\nnode.id=1\n", "Found unsupported version 0"),
        ("version=1\nnode.id=1\n", "cluster.id was not specified in the v1 file"),
        ("version=1\ncluster.id=x\n", "node.id was not specified in"),
        ("version=1\ncluster.id=x\nnode.id=one\n", "'one'"),
        ("version=1\ncluster.id=x\nnode.id=1\ndirectory.id=short\n",
         "Unable to read directory.id as a Uuid"),
    ],
)
def test_malformed_files_stop_start_up_naming_the_file(
    tmp_path: Path, text: str, reason: str
) -> None:
    (tmp_path / META_PROPERTIES).write_text(text)
    with pytest.raises(MetaPropertiesError) as caught:
        load_cluster_id([tmp_path], 1, kraft=False)
    assert reason in str(caught.value)
    assert str(tmp_path / META_PROPERTIES) in str(caught.value)


def test_single_node_creates_an_id_once_in_every_directory(tmp_path: Path) -> None:
    log_dirs = dirs(tmp_path, 3)
    cluster_id = load_cluster_id(log_dirs, 1, kraft=False)
    assert cluster_id is not None and len(parse_uuid(cluster_id)) == 16
    metas = [read(directory) for directory in log_dirs]
    assert {(meta.cluster_id, meta.node_id, meta.version) for meta in metas} == {(cluster_id, 1, 1)}
    assert len({meta.directory_id for meta in metas}) == 3
    assert load_cluster_id(log_dirs, 1, kraft=False) == cluster_id
    assert [read(directory) for directory in log_dirs] == metas  # not rewritten


def test_a_file_from_before_directory_ids_gets_one(tmp_path: Path) -> None:
    old, new = dirs(tmp_path, 2)
    old.mkdir()
    (old / META_PROPERTIES).write_text(f"cluster.id={CLUSTER}\nnode.id=1\nversion=1\n")
    assert load_cluster_id([old, new], 1, kraft=False) == CLUSTER
    assert read(old).directory_id is not None
    assert read(new).cluster_id == CLUSTER


def test_a_kraft_node_without_files_starts_with_an_unknown_cluster_id(tmp_path: Path) -> None:
    log_dirs = dirs(tmp_path, 2)
    assert load_cluster_id(log_dirs, 2, kraft=True) is None
    assert not any((directory / META_PROPERTIES).exists() for directory in log_dirs)
    write_cluster_id(log_dirs, CLUSTER, 2)
    assert [read(directory).cluster_id for directory in log_dirs] == [CLUSTER, CLUSTER]
    assert load_cluster_id(log_dirs, 2, kraft=True) == CLUSTER
    before = [read(directory) for directory in log_dirs]
    write_cluster_id(log_dirs, CLUSTER, 2)  # idempotent
    assert [read(directory) for directory in log_dirs] == before


def test_recording_another_cluster_id_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    formatted, empty = dirs(tmp_path, 2)
    write_meta_properties(formatted, MetaProperties(CLUSTER, 1, DIRECTORY))
    with pytest.raises(InconsistentClusterIdError) as caught:
        write_cluster_id([formatted, empty], OTHER_CLUSTER, 1)
    assert str(caught.value).startswith(
        f"Invalid cluster.id in: {formatted / META_PROPERTIES}. Expected {OTHER_CLUSTER}, "
        f"but read {CLUSTER}")
    assert not (empty / META_PROPERTIES).exists()


def test_a_cluster_id_that_is_not_a_uuid_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MetaPropertiesError, match="does not appear to be a valid UUID"):
        write_cluster_id([tmp_path], "not-a-uuid", 1)


def test_directories_of_two_clusters_name_both_files(tmp_path: Path) -> None:
    first, second = dirs(tmp_path, 2)
    write_meta_properties(first, MetaProperties(CLUSTER, 1))
    write_meta_properties(second, MetaProperties(OTHER_CLUSTER, 1))
    with pytest.raises(InconsistentClusterIdError) as caught:
        load_cluster_id([first, second], 1, kraft=True)
    message = str(caught.value)
    assert f"Invalid cluster.id in: {second / META_PROPERTIES}." in message
    assert f"cluster.id in {first / META_PROPERTIES}" in message


def test_directories_of_two_nodes_name_both_files(tmp_path: Path) -> None:
    first, second = dirs(tmp_path, 2)
    write_meta_properties(first, MetaProperties(CLUSTER, 1))
    write_meta_properties(second, MetaProperties(CLUSTER, 2))
    ensemble = MetaPropertiesEnsemble.load([first, second])
    with pytest.raises(InconsistentNodeIdError) as caught:
        ensemble.verify()
    message = str(caught.value)
    assert message.startswith(f"Stored node id 2 doesn't match previous node id 1 in "
                              f"{second / META_PROPERTIES}")
    assert f"node.id in {first / META_PROPERTIES}" in message
    assert "If you moved your data, make sure your configured node id matches." in message


def test_a_file_of_another_node_than_the_configured_one(tmp_path: Path) -> None:
    write_meta_properties(tmp_path, MetaProperties(CLUSTER, 1))
    with pytest.raises(InconsistentNodeIdError) as caught:
        load_cluster_id([tmp_path], 5, kraft=False)
    assert "Stored node id 1 doesn't match previous node id 5" in str(caught.value)
    assert "node.id in the configuration" in str(caught.value)


def test_two_directories_with_one_directory_id(tmp_path: Path) -> None:
    first, second = dirs(tmp_path, 2)
    for directory in (first, second):
        write_meta_properties(directory, MetaProperties(CLUSTER, 1, DIRECTORY))
    with pytest.raises(MetaPropertiesError, match=f"Duplicate directory ID {DIRECTORY} found"):
        load_cluster_id([first, second], 1, kraft=False)


def test_random_uuids_are_kafka_uuids() -> None:
    for _ in range(200):
        text = random_uuid()
        assert len(text) == 22 and not text.startswith("-")
        assert len(parse_uuid(text)) == 16


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("A" * 25, "is too long to be decoded as a base64 UUID"),
        ("AAAA", "decoded as 3 bytes, which is not equal to the expected 16 bytes"),
        ("!!!!!!!!!!!!!!!!!!!!!!", "not base64"),
    ],
)
def test_parse_uuid_refuses(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_uuid(text)


def _started(tmp_path: Path, **properties: str) -> str:
    from broker.broker import Broker
    from broker.config import BrokerConfig
    from storage.clock import ManualClock

    config = BrokerConfig.from_properties({"log.dirs": str(tmp_path), **properties,
                                           "offsets.topic.num.partitions": "1"})
    broker = Broker.create(config, clock=ManualClock(1000))
    broker.startup()
    broker.shutdown()
    return broker.cluster_id


def test_broker_start_up_single_node_and_kraft(tmp_path: Path) -> None:
    single = _started(tmp_path / "single")
    assert single and read(tmp_path / "single").cluster_id == single
    kraft = {"process.roles": "broker,controller", "node.id": "2",
             "controller.quorum.voters": "2@127.0.0.1:19193", "controller.listener.names": "CONTROLLER",
             "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}
    assert _started(tmp_path / "kraft", **kraft) == ""  # UNKNOWN_CLUSTER_ID: from the quorum
    assert not (tmp_path / "kraft" / META_PROPERTIES).exists()
    write_cluster_id([tmp_path / "kraft"], CLUSTER, 2)
    assert _started(tmp_path / "kraft", **kraft) == CLUSTER
