"""The partition assignors: Java's results for range and roundrobin, cooperative-sticky's
balance, stickiness and two-phase revocation, and the ConsumerProtocol bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from samsa.assignors import (
    Assignment,
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    Subscription,
    assignor_for,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    rebalance_protocol,
)
from samsa.types import TopicPartition as TP


def tps(topic: str, *partitions: int) -> tuple[TP, ...]:
    return tuple(TP(topic, p) for p in partitions)


def members(*names: str, topics: tuple[str, ...] = ("t",)) -> dict[str, Subscription]:
    return {name: Subscription(topics) for name in names}


def owned_by(result: dict[str, Assignment]) -> dict[str, set[TP]]:
    return {member: set(a.partitions) for member, a in result.items()}


# --- range and roundrobin: Java's results ---------------------------------------------------


def test_range_gives_consecutive_ranges_the_first_members_one_more() -> None:
    result = RangeAssignor().assign({"t": 5}, members("b", "a"))
    assert result["a"].partitions == tps("t", 0, 1, 2)
    assert result["b"].partitions == tps("t", 3, 4)


def test_range_works_topic_by_topic() -> None:
    # Java's RangeAssignor: each topic on its own, so the first member gets the extra of both.
    subscriptions = members("a", "b", topics=("t", "u"))
    result = RangeAssignor().assign({"t": 3, "u": 3}, subscriptions)
    assert result["a"].partitions == (*tps("t", 0, 1), *tps("u", 0, 1))
    assert result["b"].partitions == (*tps("t", 2), *tps("u", 2))


def test_range_orders_static_members_by_instance_id_first() -> None:
    subscriptions = {"m-1": Subscription(("t",), group_instance_id="z"),
                     "m-2": Subscription(("t",), group_instance_id="y"),
                     "m-0": Subscription(("t",))}
    result = RangeAssignor().assign({"t": 3}, subscriptions)
    assert [result[m].partitions for m in ("m-2", "m-1", "m-0")] == [
        tps("t", 0), tps("t", 1), tps("t", 2)]


def test_roundrobin_deals_sorted_partitions_skipping_unsubscribed_members() -> None:
    subscriptions = {"a": Subscription(("t",)), "b": Subscription(("t", "u")),
                     "c": Subscription(("u",))}
    result = RoundRobinAssignor().assign({"t": 3, "u": 2}, subscriptions)
    # t-0 a, t-1 b, t-2 a (c is not subscribed to t), u-0 b... the cursor moves on from a.
    assert result["a"].partitions == tps("t", 0, 2)
    assert result["b"].partitions == (*tps("t", 1), *tps("u", 0))
    assert result["c"].partitions == tps("u", 1)


def test_members_without_partitions_get_empty_assignments() -> None:
    for assignor in (RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()):
        result = assignor.assign({"t": 1}, members("a", "b", "c"))
        assert sorted(len(a.partitions) for a in result.values()) == [0, 0, 1]


def test_missing_topics_are_skipped() -> None:
    for assignor in (RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()):
        result = assignor.assign({}, members("a", topics=("gone",)))
        assert result == {"a": Assignment(())}


# --- cooperative-sticky ------------------------------------------------------------------------


def test_sticky_first_assignment_is_balanced() -> None:
    result = CooperativeStickyAssignor().assign({"t": 7}, members("a", "b", "c"))
    assert sorted(len(a.partitions) for a in result.values()) == [2, 2, 3]
    assert set().union(*owned_by(result).values()) == set(tps("t", *range(7)))


def test_cooperative_new_member_gets_moved_partitions_only_in_the_second_round() -> None:
    assignor = CooperativeStickyAssignor()
    everything = tps("t", 0, 1, 2, 3)
    first = {"a": Subscription(("t",), everything, generation_id=1), "b": Subscription(("t",))}
    round_one = owned_by(assignor.assign({"t": 4}, first))
    # a keeps two, revokes nothing yet in the assignment sense: the two moving ones are left
    # out of b's assignment until a has given them up.
    assert len(round_one["a"]) == 2 and round_one["a"] < set(everything)
    assert round_one["b"] == set()
    second = {"a": Subscription(("t",), tuple(sorted(round_one["a"])), generation_id=2),
              "b": Subscription(("t",), (), generation_id=2)}
    round_two = owned_by(assignor.assign({"t": 4}, second))
    assert round_two["a"] == round_one["a"]
    assert round_two["b"] == set(everything) - round_one["a"]


def test_sticky_keeps_owned_partitions_when_a_member_leaves() -> None:
    assignor = CooperativeStickyAssignor()
    before = owned_by(assignor.assign({"t": 6}, members("a", "b", "c")))
    after = owned_by(assignor.assign({"t": 6}, {
        "a": Subscription(("t",), tuple(sorted(before["a"])), 1),
        "b": Subscription(("t",), tuple(sorted(before["b"])), 1)}))
    assert before["a"] <= after["a"] and before["b"] <= after["b"]
    assert len(after["a"]) == len(after["b"]) == 3


def test_sticky_drops_claims_older_than_the_previous_generation() -> None:
    result = owned_by(CooperativeStickyAssignor().assign({"t": 2}, {
        "a": Subscription(("t",), tps("t", 0, 1), generation_id=1),
        "b": Subscription(("t",), tps("t", 1), generation_id=5)}))
    # a's claim (generation 1) is stale: b keeps t-1; t-0 is free and goes to a, owned by a.
    assert result == {"a": {TP("t", 0)}, "b": {TP("t", 1)}}


def test_cooperative_never_hands_a_claimed_partition_to_another_member() -> None:
    result = owned_by(CooperativeStickyAssignor().assign({"t": 2}, {
        "a": Subscription(("t",), tps("t", 0, 1), generation_id=3),
        "b": Subscription(("t",), tps("t", 1), generation_id=3)}))
    # same-generation conflict on t-1: nobody keeps it by right; it goes to a claimant, which
    # keeps it, and the other claimant, not assigned it, revokes it
    assert TP("t", 1) in result["a"] | result["b"]
    assert len(result["a"] | result["b"]) == 2


def test_sticky_respects_different_subscriptions() -> None:
    subscriptions = {"a": Subscription(("t", "u")), "b": Subscription(("u",))}
    result = owned_by(CooperativeStickyAssignor().assign({"t": 2, "u": 2}, subscriptions))
    assert all(tp.topic == "u" for tp in result["b"])
    assert len(result["a"]) == 2 and len(result["b"]) == 2


@st.composite
def group_history(draw: st.DrawFn) -> tuple[int, list[list[str]]]:
    partitions = draw(st.integers(1, 12))
    names = [f"m{i}" for i in range(6)]
    rounds = draw(st.lists(st.lists(st.sampled_from(names), min_size=1, max_size=6, unique=True),
                           min_size=1, max_size=6))
    return partitions, rounds


@settings(max_examples=150, deadline=None)
@given(group_history())
def test_cooperative_rounds_stay_valid_balanced_and_sticky(history: tuple[int, list[list[str]]]) -> None:
    """Members come and go; every round runs both cooperative phases. Invariants: no
    partition has two owners, the settled assignment is balanced (loads differ by at most
    one) and covers every partition, and a member that stays keeps what it owned up to its
    fair share."""
    partition_count, rounds = history
    assignor = CooperativeStickyAssignor()
    owned: dict[str, set[TP]] = {}
    generation = 0
    for present in rounds:
        owned = {m: owned.get(m, set()) for m in present}
        before = {m: set(p) for m, p in owned.items()}
        for _phase in range(2):
            generation += 1
            subscriptions = {m: Subscription(("t",), tuple(sorted(owned[m])), generation - 1)
                             for m in present}
            result = owned_by(assignor.assign({"t": partition_count}, subscriptions))
            for member in present:
                revoked = owned[member] - result[member]
                owned[member] = (owned[member] - revoked) | result[member]
            all_owned = [tp for m in present for tp in owned[m]]
            assert len(all_owned) == len(set(all_owned)), "a partition with two owners"
        loads = sorted(len(owned[m]) for m in present)
        assert loads[-1] - loads[0] <= 1
        assert set().union(*owned.values()) == set(tps("t", *range(partition_count)))
        fair = -(-partition_count // len(present))
        for member in present:
            assert len(before[member] & owned[member]) >= min(len(before[member]), fair - 1)


# --- protocol choice ------------------------------------------------------------------------


def test_rebalance_protocol_is_cooperative_only_if_every_assignor_supports_it() -> None:
    assert rebalance_protocol([assignor_for("cooperative-sticky")]) is RebalanceProtocol.COOPERATIVE
    assert rebalance_protocol([assignor_for("range"), assignor_for("cooperative-sticky")]) \
        is RebalanceProtocol.EAGER
    assert rebalance_protocol([assignor_for("roundrobin")]) is RebalanceProtocol.EAGER


# --- bytes -----------------------------------------------------------------------------------


def test_subscription_bytes_are_kafkas_consumer_protocol_v3() -> None:
    subscription = Subscription(("b", "a"), tps("a", 2, 1), 7, b"\x00\x00\x00\x07", "rack-1")
    data = encode_subscription(subscription)
    assert struct.unpack_from(">h", data)[0] == 3
    decoded = ConsumerProtocolSubscription.decode(data[2:], 3)
    assert decoded.topics == ["a", "b"]
    assert [(t.topic, t.partitions) for t in decoded.owned_partitions] == [("a", [1, 2])]
    assert (decoded.generation_id, decoded.rack_id, decoded.user_data) == (7, "rack-1",
                                                                           b"\x00\x00\x00\x07")
    assert decode_subscription(data) == Subscription(("a", "b"), tps("a", 1, 2), 7,
                                                     b"\x00\x00\x00\x07", "rack-1")


def test_subscription_v0_and_v1_carry_the_generation_in_user_data() -> None:
    # Java's cooperative-sticky user data: int32 generation.
    v1 = ConsumerProtocolSubscription(topics=["t"], user_data=struct.pack(">i", 4),
                                      owned_partitions=[])
    data = struct.pack(">h", 1) + v1.encode(1)
    assert decode_subscription(data).generation_id == 4
    # librdkafka's sticky user data v1: [topic [partition]] generation
    user_data = struct.pack(">ih1si2ii", 1, 1, b"t", 2, 0, 3, 9)
    v0 = ConsumerProtocolSubscription(topics=["t"], user_data=user_data)
    decoded = decode_subscription(struct.pack(">h", 0) + v0.encode(0))
    assert decoded.generation_id == 9
    assert decoded.owned_partitions == tps("t", 0, 3)


def test_a_later_version_is_read_as_the_latest_known() -> None:
    data = struct.pack(">h", 9) + ConsumerProtocolSubscription(topics=["t"]).encode(3) + b"new"
    assert decode_subscription(data).topics == ("t",)


def test_assignment_bytes_round_trip_and_match_kafkas_schema() -> None:
    assignment = Assignment((TP("u", 0), TP("t", 3), TP("t", 1)), b"ud")
    data = encode_assignment(assignment)
    decoded = ConsumerProtocolAssignment.decode(data[2:], 3)
    assert [(t.topic, t.partitions) for t in decoded.assigned_partitions] == [
        ("t", [1, 3]), ("u", [0])]
    assert decode_assignment(data) == Assignment((TP("t", 1), TP("t", 3), TP("u", 0)), b"ud")
    assert decode_assignment(b"") == Assignment(())


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xff\x00"])
def test_bad_subscription_bytes_raise_decode_error(data: bytes) -> None:
    from protocol.codec import DecodeError

    with pytest.raises(DecodeError):
        decode_subscription(data)
