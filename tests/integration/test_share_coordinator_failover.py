"""The share coordinator in a real three-node KRaft cluster: a share partition's state written
through Samsa's network persister (``broker.share.network_persister``, the same code a broker
uses to reach a share coordinator on another node: FindCoordinator SHARE, then the state APIs
over the network, retried) and acknowledged by the coordinator survives kill -9 of the
coordinator's node, and is read back from the new leader of its ``__share_group_state``
partition (replicated with acks=all; loaded there on election).

Every wait polls the cluster through the protocol with a deadline.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.node_client import NodeClient, NodeClients
from broker.share.coordinator_key import coordinator_key
from broker.share.network_persister import NetworkSharePersister
from broker.share.state_records import SharePartitionKey
from broker.share.values import StateBatch
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.find_coordinator_response import FindCoordinatorResponse
from tests.integration.cluster_nodes import ClusterNodes, cluster_nodes  # noqa: F401

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SHARE = 2
KEY = SharePartitionKey("failover-share-group", uuid.UUID(int=0xABCDEF), 0)


async def find_share_coordinator(cluster: ClusterNodes, key: SharePartitionKey) -> int | None:
    """The share coordinator of ``key`` as the first live node that names one says."""
    for node_id, node in sorted(cluster.nodes.items()):
        if not node.alive():
            continue
        client = NodeClient("127.0.0.1", cluster.client_ports[node_id], client_id="share-failover",
                            request_timeout_ms=2000)
        try:
            response = await client.send(FindCoordinatorRequest(
                key_type=SHARE, coordinator_keys=[coordinator_key(key)]), version=6)
        except Exception:
            continue
        finally:
            await client.close()
        assert isinstance(response, FindCoordinatorResponse)
        found = response.coordinators[0]
        if found.error_code == 0 and cluster.nodes[found.node_id].alive():
            return found.node_id
    return None


def persister_for(cluster: ClusterNodes) -> NetworkSharePersister:
    async def coordinator_id(key: SharePartitionKey) -> int | None:
        return await find_share_coordinator(cluster, key)

    def clients() -> NodeClients:
        return NodeClients(lambda node_id: ("127.0.0.1", cluster.client_ports[node_id]),
                           client_id="share-failover", request_timeout_ms=3000)

    return NetworkSharePersister(local=None, coordinator_id=coordinator_id, clients=clients,
                                 timeout_ms=60000)


def test_an_acknowledged_write_survives_kill_9_of_the_coordinator(cluster_nodes) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    cluster = cluster_nodes(3, broker_session_timeout_ms="3000",
                            share_coordinator_state_topic_num_partitions="3")
    persister = persister_for(cluster)
    batches = (StateBatch(100, 109, 2, 1), StateBatch(110, 119, 0, 3))

    async def before() -> int:
        await persister.initialize_state(KEY, state_epoch=1, start_offset=100)
        await persister.write_state(KEY, state_epoch=1, leader_epoch=2, start_offset=100,
                                    state_batches=batches, delivery_complete_count=10)
        coordinator = await find_share_coordinator(cluster, KEY)
        assert coordinator is not None
        await persister.close()
        return coordinator

    coordinator = asyncio.run(before())
    cluster.kill(coordinator)
    persister = persister_for(cluster)

    async def after() -> None:
        try:
            snapshot = await persister.read_state(KEY, leader_epoch=2)
            assert snapshot is not None, cluster.logs()
            assert (snapshot.state_epoch, snapshot.start_offset, snapshot.state_batches) == (1, 100, batches)
            summary = await persister.read_summary(KEY, leader_epoch=2)
            assert summary is not None and summary.delivery_complete_count == 10
            new_coordinator = await find_share_coordinator(cluster, KEY)
            assert new_coordinator not in (None, coordinator)
            await persister.write_state(KEY, state_epoch=1, leader_epoch=3, start_offset=105,
                                        state_batches=(StateBatch(120, 120, 2, 1),))
            again = await persister.read_state(KEY, leader_epoch=3)
            assert again is not None and again.state_batches[0] == StateBatch(105, 109, 2, 1)
            assert again.state_batches[-1] == StateBatch(120, 120, 2, 1)
        finally:
            await persister.close()

    asyncio.run(after())
