"""Handlers at old versions, called directly on a broker over a temp directory and encoded
at the version asked for: the bugs tests/integration/test_every_version.py and
test_old_clients.py found.

- ListOffsets v1-v3 answered with a leader epoch, a field those versions lack: the encoder
  refused and the connection dropped (kcat 1.7.1 / librdkafka 2.0.2 could not consume).
- Metadata v10-v11 with a null topic name (or a topic id) echoed the null into a response
  version whose names are not nullable.
- OffsetCommit v2-v4 with a retention time near 2^63 overflowed the expire timestamp.
- FindCoordinator v0 and JoinGroup v0-v1, which Kafka 4 serves and librdkafka 2.0.2 requires
  before it uses consumer groups, were not served.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import pytest

from broker.apis import (
    RequestContext,
    find_coordinator,
    join_group,
    list_offsets,
    metadata,
    offset_commit,
)
from broker.broker import Broker
from broker.config import BrokerConfig
from protocol.errors import ErrorCode, InvalidRequestError
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.find_coordinator_response import FindCoordinatorResponse
from protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.join_group_response import JoinGroupResponse
from protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.list_offsets_response import ListOffsetsResponse
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.metadata_response import MetadataResponse
from protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_commit_response import OffsetCommitResponse
from protocol.messages.request_header import RequestHeader
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic

INT64_MAX = 2**63 - 1
EARLIEST, LATEST = -2, -1


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    properties = {"log.dirs": str(tmp_path), "offsets.topic.num.partitions": "1",
                  "group.initial.rebalance.delay.ms": "0"}
    broker = Broker.create(BrokerConfig.from_properties(properties), clock=ManualClock())
    broker.startup()
    broker.offsets_loader.load_all()
    create_topic(broker, "t")
    yield broker
    broker.shutdown()


def context(broker: Broker, api_key: int, version: int) -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=1)
    return RequestContext(header=header, api_version=version, broker=broker, connection_id="test")


@pytest.mark.parametrize("version", range(1, 11))
def test_list_offsets_answers_a_leader_epoch_only_where_the_version_has_one(
    broker: Broker, version: int,
) -> None:
    request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name="t", partitions=[
        ListOffsetsPartition(partition_index=0, timestamp=EARLIEST)])])
    response = list_offsets.handle(context(broker, 2, version), request)
    decoded = ListOffsetsResponse.decode(response.encode(version), version)
    partition = decoded.topics[0].partitions[0]
    assert (partition.error_code, partition.offset) == (0, 0)
    assert partition.leader_epoch == (0 if version >= 4 else -1)


@pytest.mark.parametrize("version", [10, 11])
@pytest.mark.parametrize("topic", [
    MetadataRequestTopic(name=None),
    MetadataRequestTopic(name="t", topic_id=UUID(int=1)),
], ids=["null-name", "topic-id"])
def test_metadata_before_v12_refuses_topics_not_named_by_name(
    broker: Broker, version: int, topic: MetadataRequestTopic,
) -> None:
    request = MetadataRequest(topics=[topic])
    with pytest.raises(InvalidRequestError):
        metadata.handle(context(broker, 3, version), request)
    answer = metadata.error_response(request, InvalidRequestError())
    decoded = MetadataResponse.decode(answer.encode(version), version)
    assert [(t.name, t.error_code) for t in decoded.topics] == [
        (topic.name or "", ErrorCode.INVALID_REQUEST)]


def test_metadata_v12_finds_a_topic_by_id(broker: Broker) -> None:
    topic_id = broker.replica_manager.topic_by_name("t").topic_id  # type: ignore[union-attr]
    request = MetadataRequest(topics=[MetadataRequestTopic(name=None, topic_id=topic_id)])
    response = metadata.handle(context(broker, 3, 12), request)
    decoded = MetadataResponse.decode(response.encode(12), 12)
    assert [(t.name, t.error_code) for t in decoded.topics] == [("t", 0)]


@pytest.mark.parametrize("version", [2, 3, 4])  # the versions with a retention time
@pytest.mark.parametrize("retention_time_ms", [INT64_MAX, INT64_MAX - 1000])  # + now > 2^63
def test_offset_commit_with_a_huge_retention_time_never_expires(
    broker: Broker, version: int, retention_time_ms: int,
) -> None:
    request = OffsetCommitRequest(group_id="g", retention_time_ms=retention_time_ms, topics=[
        OffsetCommitRequestTopic(name="t", partitions=[
            OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])])
    response = offset_commit.handle(context(broker, 8, version), request)
    decoded = OffsetCommitResponse.decode(response.encode(version), version)  # type: ignore[union-attr]
    assert decoded.topics[0].partitions[0].error_code == 0
    stored = broker.offset_store.fetch("g", "t", 0)
    assert stored is not None and stored.expire_timestamp_ms == INT64_MAX


def test_find_coordinator_v0_names_this_node_for_a_group(broker: Broker) -> None:
    response = find_coordinator.handle(context(broker, 10, 0), FindCoordinatorRequest(key="g"))
    decoded = FindCoordinatorResponse.decode(response.encode(0), 0)
    assert (decoded.error_code, decoded.node_id) == (0, broker.node_id)
    assert decoded.port > 0


@pytest.mark.parametrize(("version", "rebalance_timeout_ms"), [(0, 7000), (1, 9000)])
def test_join_group_v0_takes_the_session_timeout_as_its_rebalance_timeout(
    broker: Broker, version: int, rebalance_timeout_ms: int,
) -> None:
    request = JoinGroupRequest(group_id="g", session_timeout_ms=7000, rebalance_timeout_ms=9000,
                               member_id="", protocol_type="consumer",
                               protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")])
    if version == 0:
        request.rebalance_timeout_ms = -1  # v0 has no such field: the default

    async def join() -> JoinGroupResponse:
        result = join_group.handle(context(broker, 11, version), request)
        return result if isinstance(result, JoinGroupResponse) else await result  # type: ignore[misc]

    response = asyncio.run(join())
    decoded = JoinGroupResponse.decode(response.encode(version), version)
    assert decoded.error_code == 0 and decoded.leader == decoded.member_id != ""
    group = broker.group_coordinator.get_group("g")
    assert group is not None and group.rebalance_timeout_ms == rebalance_timeout_ms
