"""KIP-966 eligible leader replicas in ``build_partition_change`` and the broker events that use
it: Kafka's ``PartitionChangeBuilder`` ELR rules, table-driven, then as properties over random
partitions, then through registration / fencing / unfencing of a cluster image."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.messages.metadata.config_record import ConfigRecord
from protocol.messages.metadata.feature_level_record import FeatureLevelRecord
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.topic_record import TopicRecord
from replication.controller.cluster_control import plan_fence_broker
from replication.controller.partition_change import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    Election,
    ElrPolicy,
    build_partition_change,
    elr_policy,
)
from replication.metadata.image import (
    NO_LEADER,
    RECOVERED,
    RECOVERING,
    PartitionImage,
    merge_partition,
)
from replication.metadata.records import decode_metadata_record, encode_metadata_record
from tests.unit.replication.controller.cluster import Cluster

TOPIC_ID = uuid.UUID(int=7)


def partition(replicas: list[int], isr: list[int], leader: int, elr: list[int] | None = None,
              last_known: list[int] | None = None) -> PartitionImage:
    return PartitionImage(0, tuple(replicas), tuple(isr), leader, 5, 9,
                          eligible_leader_replicas=tuple(elr or ()),
                          last_known_elr=tuple(last_known or ()))


def fields(record: PartitionChangeRecord | None) -> dict[str, object] | None:
    if record is None:
        return None
    defaults = PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID)
    return {name: getattr(record, name) for name in (
        "isr", "leader", "leader_recovery_state", "eligible_leader_replicas", "last_known_elr")
        if getattr(record, name) != getattr(defaults, name)}


CASES: list[tuple[str, PartitionImage, set[int], dict[str, object], dict[str, object] | None]] = [
    # (name, partition, active brokers, builder arguments (min ISR 2 unless given), fields)
    ("the isr shrinks below min isr: the leavers become eligible",
     partition([1, 2, 3], [1, 2, 3], 1), {1, 2, 3}, {"isr": [1]},
     {"isr": [1], "eligible_leader_replicas": [2, 3]}),
    ("the isr shrinks to min isr: no elr",
     partition([1, 2, 3], [1, 2, 3], 1), {1, 2, 3}, {"isr": [1, 2]}, {"isr": [1, 2]}),
    ("the isr grows back to min isr: the elr empties",
     partition([1, 2, 3], [1], 1, elr=[2, 3]), {1, 2, 3}, {"isr": [1, 2]},
     {"isr": [1, 2], "eligible_leader_replicas": []}),
    ("the last isr member is fenced: an eligible replica leads alone",
     partition([1, 2, 3], [1], 1, elr=[2, 3]), {2, 3}, {"isr": []},
     {"isr": [2], "leader": 2, "eligible_leader_replicas": [1, 3]}),
    ("Kafka's clean shutdown of a single node: isr empties, elr and last known leader keep it",
     partition([1], [1], 1), set(), {"isr": [], "min_isr": 1},
     {"isr": [], "leader": NO_LEADER, "eligible_leader_replicas": [1], "last_known_elr": [1]}),
    ("that node back: elected from the elr, cleanly",
     partition([1], [], NO_LEADER, elr=[1], last_known=[1]), {1}, {"min_isr": 1},
     {"isr": [1], "leader": 1, "eligible_leader_replicas": [], "last_known_elr": []}),
    ("that node registers after an unclean shutdown: out of the elr, last known leader kept",
     partition([1], [], NO_LEADER, elr=[1], last_known=[1]), set(),
     {"min_isr": 1, "unclean_shutdown_replicas": [1]}, {"eligible_leader_replicas": []}),
    ("then unfenced: the last known leader, an unclean election",
     partition([1], [], NO_LEADER, last_known=[1]), {1}, {"min_isr": 1},
     {"isr": [1], "leader": 1, "leader_recovery_state": RECOVERING, "last_known_elr": []}),
    ("the last known leader is not elected while it cannot lead",
     partition([1, 2], [], NO_LEADER, last_known=[1]), {2}, {}, None),
    ("the last known leader waits while some replica is eligible",
     partition([1, 2], [], NO_LEADER, elr=[2], last_known=[1]), {1}, {}, None),
    ("a replica that shut down uncleanly is not eligible",
     partition([1, 2, 3], [1, 2], 1), {1, 2, 3}, {"isr": [1], "unclean_shutdown_replicas": [2]},
     {"isr": [1]}),
    ("eligible replicas lead only when the isr is empty",
     partition([1, 2, 3], [3], NO_LEADER, elr=[1, 2]), {1, 2, 3}, {}, {"leader": 3}),
    ("a preferred election from the elr keeps assignment order",
     partition([1, 2, 3], [], NO_LEADER, elr=[3, 2]), {1, 2, 3},
     {"election": Election.PREFERRED}, {"isr": [2], "leader": 2, "eligible_leader_replicas": [3]}),
    ("an unclean election empties the elr",
     partition([1, 2, 3], [1], NO_LEADER, elr=[2]), {3}, {"election": Election.UNCLEAN},
     {"isr": [3], "leader": 3, "leader_recovery_state": RECOVERING,
      "eligible_leader_replicas": []}),
    ("elr off: the isr keeps its last member",
     partition([1, 2, 3], [1, 2, 3], 1), {1, 2, 3}, {"isr": [1], "enabled": False},
     {"isr": [1]}),
    # Kafka's builder checks a leftover ELR whether or not ELR is on (then clears it)
    ("elr off: an elr left by Kafka still elects, and is cleared",
     partition([1], [], NO_LEADER, elr=[1], last_known=[1]), {1}, {"enabled": False},
     {"isr": [1], "leader": 1, "eligible_leader_replicas": []}),
    ("elr off: the last known leader is not elected",
     partition([1], [], NO_LEADER, last_known=[1]), {1}, {"enabled": False}, None),
]


def build(part: PartitionImage, active: set[int], *, min_isr: int = 2, enabled: bool = True,
          **targets: object) -> PartitionChangeRecord | None:
    return build_partition_change(
        TOPIC_ID, part, is_acceptable_leader=active.__contains__,
        elr=ElrPolicy(enabled=enabled, min_insync_replicas=min_isr), **targets)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "part", "active", "arguments", "expected"), CASES,
                         ids=[case[0] for case in CASES])
def test_elr_rules(name: str, part: PartitionImage, active: set[int],
                   arguments: dict[str, object], expected: dict[str, object] | None) -> None:
    record = build(part, active, **arguments)  # type: ignore[arg-type]
    assert fields(record) == expected
    if record is not None:  # what the image gets is what the codec carries
        decoded, _ = decode_metadata_record(encode_metadata_record(record))
        assert decoded == record


# -- properties -----------------------------------------------------------------------------


@st.composite
def situations(draw: st.DrawFn) -> tuple[PartitionImage, dict[str, object], set[int], int]:
    """A partition satisfying the ELR invariants, a change to it, the active brokers and the
    min ISR."""
    replicas = draw(st.permutations(range(1, draw(st.integers(1, 5)) + 1)))
    isr = draw(st.lists(st.sampled_from(replicas), unique=True))
    outside = [r for r in replicas if r not in isr]
    min_isr = draw(st.integers(1, len(replicas)))
    elr: list[int] = []
    if outside and len(isr) < min_isr:
        elr = draw(st.lists(st.sampled_from(outside), unique=True))
    has_leader: bool = draw(st.booleans())
    leader = draw(st.sampled_from(isr)) if isr and has_leader else NO_LEADER
    last_known: list[int] = []
    if leader == NO_LEADER and draw(st.booleans()):
        last_known = [draw(st.sampled_from(replicas))]
    part = PartitionImage(0, tuple(replicas), tuple(isr), leader, 3, 4,
                          eligible_leader_replicas=tuple(sorted(elr)),
                          last_known_elr=tuple(last_known))
    shrink = [r for r in isr if draw(st.booleans())]
    target_isr = draw(st.sampled_from([isr, shrink, sorted(set(isr) | {replicas[0]})]))
    arguments: dict[str, object] = {
        "isr": target_isr,
        "election": draw(st.sampled_from(list(Election))),
        "unclean_shutdown_replicas": draw(st.lists(st.sampled_from(replicas), unique=True, max_size=1)),
    }
    active = set(draw(st.lists(st.sampled_from(replicas), unique=True)))
    if leader not in target_isr:  # a leader leaves the ISR only when it cannot lead
        active.discard(leader)
    return part, arguments, active, min_isr


@settings(max_examples=300, deadline=None)
@given(situation=situations())
def test_elr_invariants(situation: tuple[PartitionImage, dict[str, object], set[int], int]) -> None:
    part, arguments, active, min_isr = situation
    record = build(part, active, min_isr=min_isr, **arguments)  # type: ignore[arg-type]
    if record is None:
        return
    after = merge_partition(part, record)
    target_isr = list(arguments["isr"])  # type: ignore[call-overload]
    unclean_shutdown = set(arguments["unclean_shutdown_replicas"])  # type: ignore[call-overload]
    assert not set(after.isr) & set(after.eligible_leader_replicas)
    assert after.leader == NO_LEADER or after.leader in after.isr
    assert set(after.eligible_leader_replicas) <= set(part.isr) | set(part.eligible_leader_replicas)
    assert not set(after.eligible_leader_replicas) & unclean_shutdown
    if len(target_isr) >= min_isr:
        assert not after.eligible_leader_replicas
    if after.leader != part.leader and after.leader != NO_LEADER:
        assert after.leader in active
        clean = (after.leader in target_isr
                 or (not target_isr and after.leader in part.isr + part.eligible_leader_replicas))
        assert clean or after.leader_recovery_state == RECOVERING, "unclean without RECOVERING"
        assert not after.last_known_elr
    if (part.leader in active and part.leader in target_isr
            and arguments["election"] is not Election.PREFERRED):
        assert after.leader == part.leader  # a valid leader is kept


@settings(max_examples=200, deadline=None)
@given(situation=situations())
def test_elr_off_never_writes_elr_nor_empties_the_isr(
    situation: tuple[PartitionImage, dict[str, object], set[int], int],
) -> None:
    part, arguments, active, min_isr = situation
    record = build(part, active, min_isr=min_isr, enabled=False, **arguments)
    if record is None:
        return
    assert record.eligible_leader_replicas in (None, [])
    assert record.last_known_elr is None
    assert record.isr is None or record.isr
    after = merge_partition(part, record)
    assert after.leader == NO_LEADER or after.leader in after.isr


# -- through the cluster's broker events ------------------------------------------------------


def kafka_like_cluster(*, elr: bool = True, min_isr: str | None = None) -> Cluster:
    """One broker and one single-replica topic, as Apache Kafka 4.3 leaves them after a clean
    shutdown: leader -1, ISR [], ELR [1], last known leader 1."""
    cluster = Cluster()
    if elr:
        cluster.apply([FeatureLevelRecord(name=ELIGIBLE_LEADER_REPLICAS_VERSION, feature_level=1)])
    cluster.start_brokers([1])
    topic_id = uuid.uuid4()
    cluster.apply([
        TopicRecord(name="t", topic_id=topic_id),
        PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1], isr=[1], leader=1,
                        leader_epoch=0, partition_epoch=0),
    ])
    if min_isr is not None:
        cluster.apply([ConfigRecord(resource_type=2, resource_name="t",
                                    name="min.insync.replicas", value=min_isr)])
    cluster.heartbeat(1, want_shut_down=True)  # controlled shutdown
    return cluster


def test_a_clean_stop_leaves_the_partition_as_kafka_does() -> None:
    cluster = kafka_like_cluster()
    p = cluster.partition("t")
    assert (p.leader, p.isr, p.eligible_leader_replicas, p.last_known_elr) == (-1, (), (1,), (1,))


def test_the_broker_back_after_a_clean_stop_leads_from_the_elr() -> None:
    cluster = kafka_like_cluster()
    epoch = cluster.image.brokers.by_id[1].epoch
    cluster.now_ms += 10_000
    cluster.register(1, incarnation=uuid.uuid4(), previous_broker_epoch=epoch)
    assert cluster.partition("t").eligible_leader_replicas == (1,)
    cluster.heartbeat(1)
    p = cluster.partition("t")
    assert (p.leader, p.isr, p.eligible_leader_replicas, p.last_known_elr) == (1, (1,), (), ())
    assert p.leader_recovery_state == RECOVERED


def test_the_broker_back_after_an_unclean_stop_leads_as_last_known_leader_recovering() -> None:
    cluster = kafka_like_cluster()
    cluster.now_ms += 10_000
    cluster.register(1, incarnation=uuid.uuid4(), previous_broker_epoch=-1)
    p = cluster.partition("t")
    assert (p.leader, p.isr, p.eligible_leader_replicas, p.last_known_elr) == (-1, (), (), (1,))
    cluster.heartbeat(1)
    p = cluster.partition("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (1, (1,), RECOVERING)


def test_elr_off_a_kafka_elr_elects_nobody() -> None:
    """Samsa's own clusters do not finalize the feature: Kafka's ELR is cleared, and the
    partition waits for an unclean election, as without KIP-966."""
    cluster = kafka_like_cluster(elr=False)
    assert cluster.partition("t").isr == (1,)  # the last ISR member stayed
    cluster.heartbeat(1)  # a stale session's fencing and a new registration are not needed


def _wiped_last_isr_member() -> Cluster:
    cluster = Cluster()
    cluster.apply([FeatureLevelRecord(name=ELIGIBLE_LEADER_REPLICAS_VERSION, feature_level=1)])
    cluster.start_brokers([1, 2, 3])
    cluster.add_topic("t", [[3, 1, 2]])
    cluster.apply([ConfigRecord(resource_type=2, resource_name="t",
                                name="min.insync.replicas", value="2")])
    policy = elr_policy(cluster.image, cluster.image.topics_by_name["t"])
    assert policy == ElrPolicy(enabled=True, min_insync_replicas=2)
    cluster.apply(plan_fence_broker(cluster.image, 1))  # the ISR is still at min ISR: no ELR
    cluster.apply(plan_fence_broker(cluster.image, 2))  # below it: 2 holds every committed record
    p = cluster.partition("t")
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (3, (3,), (2,))
    cluster.apply(plan_fence_broker(cluster.image, 3))  # the last ISR member dies
    p = cluster.partition("t")
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (-1, (), (2, 3))
    cluster.now_ms += 10_000
    cluster.register(3, incarnation=uuid.uuid4())  # wiped: no clean-shutdown epoch
    cluster.heartbeat(3)
    p = cluster.partition("t")
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (-1, (), (2,))
    cluster.register(1, incarnation=uuid.uuid4())  # fell behind before: not eligible
    cluster.heartbeat(1)
    assert cluster.partition("t").leader == -1
    return cluster


def test_a_wiped_last_isr_member_is_not_elected() -> None:
    """Issue 13's finding: the ISR shrank to one node, that node lost its disk and came back.
    With ELR the replica that left the ISR below min ISR stayed eligible; the wiped node (no
    clean-shutdown epoch) leaves the ELR at registration and is not elected; the eligible
    replica, back after a clean stop, leads."""
    cluster = _wiped_last_isr_member()
    epoch = cluster.image.brokers.by_id[2].epoch
    cluster.register(2, incarnation=uuid.uuid4(), previous_broker_epoch=epoch)
    cluster.heartbeat(2)
    p = cluster.partition("t")
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (2, (2,), ())
    assert p.leader_recovery_state == RECOVERED


def test_with_every_eligible_replica_back_uncleanly_the_last_known_leader_leads() -> None:
    """Kafka's balanced recovery: no replica is known to hold every committed record, so the
    last leader is elected, uncleanly (RECOVERING)."""
    cluster = _wiped_last_isr_member()
    cluster.register(2, incarnation=uuid.uuid4())
    cluster.heartbeat(2)
    p = cluster.partition("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (3, (3,), RECOVERING)


def test_min_isr_is_at_most_the_replication_factor() -> None:
    cluster = kafka_like_cluster(min_isr="3")
    assert elr_policy(cluster.image, cluster.image.topics_by_name["t"]).min_insync_replicas == 1
