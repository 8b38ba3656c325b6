"""Samsa against Apache Kafka itself: the same requests to both, the answers compared.

One Apache Kafka 4.3.1 node (``apache_kafka``, KRaft combined mode) and one Samsa broker
(configured as the Kafka node is where the test fixture departs from Kafka's defaults:
``group.initial.rebalance.delay.ms=0``) live for the whole module. Each test sends scripted
request sequences, built with Samsa's generated codec at the versions modern clients use and
at the oldest and newest versions both brokers advertise, and compares the responses field
by field (``differential.py``); whatever may differ is in its ``ALLOWLIST`` or in an
``allow=`` list next to the request, each entry with its reason. Topic and group names carry
a per-run suffix, so both brokers start each sequence from the same state.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from compat.apache_kafka import ApacheKafka
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.integration.conftest import BrokerProcess
from tests.integration.kafka.differential import (
    API_VERSIONS,
    CLOSED,
    CREATE_TOPICS,
    DELETE_TOPICS,
    METADATA,
    PRODUCE,
    Allowed,
    Pair,
    Wire,
)

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:6]


def name(stem: str) -> str:
    return f"diff-{stem}-{RUN}"


@pytest.fixture(scope="module")
def samsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("samsa")
    broker = BrokerProcess(log_dir=directory / "logs", stderr_path=directory / "broker.log",
                           overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    yield broker
    assert broker.stop() == 0, broker.log()[-3000:]


@pytest.fixture(scope="module")
def pair(apache_kafka: ApacheKafka, samsa: BrokerProcess) -> Iterator[Pair]:
    connections = Pair(Wire(("127.0.0.1", apache_kafka.port)), Wire((samsa.host, samsa.port)))
    yield connections
    connections.close()


@pytest.fixture(scope="module")
def versions(pair: Pair) -> dict[int, tuple[int, int]]:
    """API key -> (oldest, newest) version both brokers advertise."""
    kafka, samsa = pair.both(ApiVersionsRequest(client_software_name="differential",
                                                client_software_version="1"), 3)
    ranges = {api.api_key: (api.min_version, api.max_version) for api in samsa.api_keys}
    return {api.api_key: (max(api.min_version, ranges[api.api_key][0]),
                          min(api.max_version, ranges[api.api_key][1]))
            for api in kafka.api_keys if api.api_key in ranges}


def span(versions: dict[int, tuple[int, int]], api_key: int, *modern: int,
         least: int = 0) -> list[int]:
    """The oldest and newest common versions (the oldest at least ``least``) and ``modern``."""
    oldest, newest = versions[api_key]
    return sorted({max(oldest, least), newest, *(v for v in modern if oldest <= v <= newest)})


def each(pair: Pair, version: int, build: Any, *, allow: list[Allowed] | None = None) -> tuple[Any, Any]:
    """``build(side)`` makes each broker's own request (its producer id, topic id...)."""
    request = build("kafka")
    kafka = pair.kafka.call(request, version)
    samsa = pair.samsa.call(build("samsa"), version)
    pair.assert_same(request.API_KEY, version, kafka, samsa, allow=allow)
    return kafka, samsa


def create_topic(pair: Pair, topic: str, partitions: int = 1, **configs: str) -> None:
    request = CreateTopicsRequest(timeout_ms=10000, topics=[CreatableTopic(
        name=topic, num_partitions=partitions, replication_factor=1,
        configs=[CreatableTopicConfig(name=k.replace("_", "."), value=v)
                 for k, v in configs.items()])])
    kafka, _ = pair.compare(request, 7)
    assert kafka.topics[0].error_code == 0
    await_leaders(pair, topic)


def await_leaders(pair: Pair, topic: str, timeout_s: float = 20) -> None:
    """Metadata until both brokers name a leader for every partition of ``topic``."""
    deadline = time.monotonic() + timeout_s
    request = MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                              allow_auto_topic_creation=False)
    for wire in (pair.kafka, pair.samsa):
        while True:
            (described,) = wire.call(request, 12).topics
            if described.error_code == 0 and all(p.leader_id >= 0 for p in described.partitions):
                break
            assert time.monotonic() < deadline, f"{topic}: no leader in {timeout_s} s"
            time.sleep(0.02)


# -- ApiVersions and requests both must refuse --------------------------------------------------


def test_api_versions(pair: Pair) -> None:
    for version in (0, 3):
        pair.compare(ApiVersionsRequest(client_software_name="differential",
                                        client_software_version="1"), version)


def test_api_versions_above_the_newest_is_answered_at_v0(pair: Pair) -> None:
    """A v0 UNSUPPORTED_VERSION answer listing the ranges, so the client can pick one."""
    request = ApiVersionsRequest(client_software_name="differential", client_software_version="1")
    kafka, samsa = (wire.call_raw(wire.frame(request, 3, claimed_version=127), API_VERSIONS, 0)
                    for wire in (pair.kafka, pair.samsa))
    assert kafka.error_code == samsa.error_code == 35
    pair.assert_same(API_VERSIONS, 0, kafka, samsa)


def test_unknown_api_key_and_unsupported_version_close_the_connection(pair: Pair) -> None:
    """Kafka cannot parse such a request, so it closes the connection; Samsa must too."""
    for api_key, version in ((999, 0), (METADATA, 99), (PRODUCE, 99)):
        kafka = pair.kafka.call_raw(pair.kafka.raw(api_key, version, bytes(8)), METADATA, 0)
        samsa = pair.samsa.call_raw(pair.samsa.raw(api_key, version, bytes(8)), METADATA, 0)
        assert (kafka, samsa) == (CLOSED, CLOSED), (api_key, version)


# -- topics: CreateTopics, Metadata, DeleteTopics ----------------------------------------------

CREATE_CASES: list[tuple[str, int, int, dict[str, str]]] = [
    # (topic stem, partitions, replication factor, configs)
    ("valid", 2, 1, {}),
    ("valid", 2, 1, {}),  # again: TOPIC_ALREADY_EXISTS
    ("bad/name", 1, 1, {}),
    ("x" * 250, 1, 1, {}),
    ("defaults", -1, -1, {}),
    ("zero-partitions", 0, 1, {}),
    ("too-many-replicas", 1, 3, {}),
    ("zero-replicas", 1, 0, {}),
    ("unknown-config", 1, 1, {"no.such.config": "1"}),
    ("bad-number", 1, 1, {"retention.ms": "abc"}),
    ("bad-policy", 1, 1, {"cleanup.policy": "bogus"}),
    ("bad-isr", 1, 1, {"min.insync.replicas": "0"}),
    ("configured", 3, 1, {"retention.ms": "1000", "cleanup.policy": "compact"}),
]


def test_create_topics(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    for version in span(versions, CREATE_TOPICS, 4, 7):
        for validate_only in ((False, True) if version >= 1 else (False,)):
            for stem, partitions, replication_factor, configs in CREATE_CASES:
                topic = stem if "/" in stem or len(stem) > 200 else \
                    name(f"{stem}-v{version}-{int(validate_only)}")
                pair.compare(CreateTopicsRequest(
                    timeout_ms=10000, validate_only=validate_only, topics=[CreatableTopic(
                        name=topic, num_partitions=partitions,
                        replication_factor=replication_factor,
                        configs=[CreatableTopicConfig(name=key, value=value)
                                 for key, value in configs.items()])]), version)


def test_metadata(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    topic = name("metadata")
    create_topic(pair, topic, 3)
    for version in span(versions, METADATA, 9, 12):
        pair.compare(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), version)
        if version >= 4:
            pair.compare(MetadataRequest(topics=[MetadataRequestTopic(
                name=name(f"missing-v{version}"))], allow_auto_topic_creation=False), version)
            pair.compare(MetadataRequest(topics=[MetadataRequestTopic(
                name="bad/name")], allow_auto_topic_creation=True), version)
    newest = versions[METADATA][1]
    # By topic id (v12+): each broker is asked about its own id; an unknown id is refused.
    if newest >= 12:
        ids = {side: wire.call(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12)
               .topics[0].topic_id for side, wire in (("kafka", pair.kafka), ("samsa", pair.samsa))}
        each(pair, 12, lambda side: MetadataRequest(topics=[MetadataRequestTopic(
            topic_id=ids[side])]))
        pair.compare(MetadataRequest(topics=[MetadataRequestTopic(topic_id=uuid.uuid4())]), 12)


def test_metadata_auto_creates_a_missing_topic(pair: Pair) -> None:
    topic = name("auto-created")
    pair.compare(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                 allow_auto_topic_creation=True), 12, allow=[AUTO_CREATING])
    await_leaders(pair, topic)
    pair.compare(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12)


# Kafka 4 (KRaft) answers UNKNOWN_TOPIC_OR_PARTITION while it forwards the creation to the
# controller (AutoTopicCreationManager); Samsa answers LEADER_NOT_AVAILABLE with the new topic's
# id until its logs exist (retriable either way; Samsa's own client and CLI read
# UNKNOWN_TOPIC_OR_PARTITION as "auto-creation is off").
AUTO_CREATING = Allowed(METADATA, "topics[*].error_code", "auto-creation in progress: 3 vs 5")


def test_delete_topics(pair: Pair, versions: dict[int, tuple[int, int]]) -> None:
    for version in span(versions, DELETE_TOPICS, 4):
        topic = name(f"deleted-v{version}")
        create_topic(pair, topic)
        if version >= 6:
            topics = [DeleteTopicState(name=topic), DeleteTopicState(name=name("never")),
                      DeleteTopicState(topic_id=uuid.uuid4())]
            pair.compare(DeleteTopicsRequest(topics=topics, timeout_ms=10000), version)
        else:
            pair.compare(DeleteTopicsRequest(topic_names=[topic, name("never")],
                                             timeout_ms=10000), version)
