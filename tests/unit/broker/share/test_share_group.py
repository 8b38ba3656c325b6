"""ShareGroup (ShareGroupHeartbeat's decisions) and the share assignor, table-driven: each
transition and each error, and the assignor's balance in small known cases."""

from __future__ import annotations

from uuid import UUID

import pytest

from broker.share.share_assignor import assign_share_partitions
from broker.share.share_group import ShareGroup, ShareGroupConfig, ShareGroupState, TopicMetadata
from protocol.errors import ErrorCode

FOO, BAR = UUID(int=1), UUID(int=2)
TOPICS = {"foo": TopicMetadata(FOO, 3), "bar": TopicMetadata(BAR, 2)}


def joined(*member_ids: str, topics: dict[str, TopicMetadata] = TOPICS) -> ShareGroup:
    group = ShareGroup("g", ShareGroupConfig(max_size=3))
    for member_id in member_ids:
        assert group.heartbeat(member_id, 0, ["foo"], topics=topics, now_ms=0).error == ErrorCode.NONE
    return group


@pytest.mark.parametrize(
    ("member_id", "epoch", "names", "rack_id", "message"),
    [
        ("", 0, ["foo"], None, "MemberId can't be empty."),
        ("  ", 1, None, None, "MemberId can't be empty."),
        ("m", 0, ["foo"], " ", "RackId can't be empty."),
        ("m", 0, None, None, "SubscribedTopicNames must be set in first request."),
        ("m", 0, [], None, "SubscribedTopicNames must be set in first request."),
        ("m", -2, None, None, "MemberEpoch is invalid."),
    ],
)
def test_malformed_requests_are_invalid_and_change_nothing(member_id, epoch, names, rack_id, message):
    group = joined("a")
    before = (group.group_epoch, dict(group.members))
    result = group.heartbeat(member_id, epoch, names, rack_id=rack_id, topics=TOPICS, now_ms=1)
    assert (result.error, result.error_message) == (ErrorCode.INVALID_REQUEST, message)
    assert (group.group_epoch, dict(group.members)) == before


@pytest.mark.parametrize(
    ("member_id", "epoch", "error"),
    [
        ("a", 2, ErrorCode.FENCED_MEMBER_EPOCH),  # ahead of the member's epoch (1)
        ("b", 1, ErrorCode.FENCED_MEMBER_EPOCH),  # b is at 2 and was at 0: 1 is neither
        ("z", 1, ErrorCode.UNKNOWN_MEMBER_ID),
        ("z", -1, ErrorCode.UNKNOWN_MEMBER_ID),
    ],
)
def test_fenced_and_unknown_members_change_nothing(member_id, epoch, error):
    group = joined("a", "b")
    before = (group.group_epoch, dict(group.members), dict(group.target_assignment))
    assert group.heartbeat(member_id, epoch, None, topics=TOPICS, now_ms=1).error == error
    assert (group.group_epoch, dict(group.members), dict(group.target_assignment)) == before


def test_the_previous_epoch_is_accepted_a_lost_response():
    group = joined("a", "b")  # b joined at 0 and is now at 2
    result = group.heartbeat("b", 0, ["foo"], topics=TOPICS, now_ms=1)
    assert (result.error, result.member_epoch) == (ErrorCode.NONE, 2)
    assert result.assignment is not None  # a join always gets its assignment


def test_group_max_size_refuses_new_members_only():
    group = joined("a", "b", "c")
    assert group.heartbeat("d", 0, ["foo"], topics=TOPICS, now_ms=1).error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert group.heartbeat("a", 1, None, topics=TOPICS, now_ms=1).error == ErrorCode.NONE
    assert len(group.members) == 3


def test_join_heartbeat_converge_and_leave():
    group = ShareGroup("g")
    assert group.state is ShareGroupState.EMPTY
    first = group.heartbeat("a", 0, ["foo"], topics=TOPICS, now_ms=0, client_id="c", client_host="/h")
    assert (first.member_id, first.member_epoch, first.heartbeat_interval_ms) == ("a", 1, 5_000)
    assert first.assignment == {FOO: (0, 1, 2)}
    assert group.state is ShareGroupState.STABLE
    second = group.heartbeat("b", 0, ["foo"], topics=TOPICS, now_ms=0)
    assert (second.member_epoch, group.group_epoch, group.assignment_epoch) == (2, 2, 2)
    # a is still at epoch 1 holding all three until it heartbeats; then it converges directly
    assert group.members["a"].assigned_partitions == {FOO: frozenset({0, 1, 2})}
    moved = group.heartbeat("a", 1, None, topics=TOPICS, now_ms=1)
    assert moved.member_epoch == 2
    assert moved.assignment is not None and len(moved.assignment[FOO]) + len(second.assignment[FOO]) == 3
    # an unchanged heartbeat sends no assignment and bumps nothing
    same = group.heartbeat("a", 2, ["foo"], topics=TOPICS, now_ms=2)
    assert (same.assignment, group.group_epoch) == (None, 2)
    left = group.heartbeat("b", -1, None, topics=TOPICS, now_ms=3)
    assert (left.error, left.member_epoch, group.group_epoch, group.assignment_epoch) == (ErrorCode.NONE, -1, 3, 2)
    # the target catches up at the next heartbeat
    assert group.heartbeat("a", 2, None, topics=TOPICS, now_ms=4).assignment == {FOO: (0, 1, 2)}
    assert group.assignment_epoch == 3


@pytest.mark.parametrize(
    ("change", "bumps"),
    [
        (lambda g: g.heartbeat("a", 1, ["foo", "bar"], topics=TOPICS, now_ms=1), True),
        (lambda g: g.heartbeat("a", 1, ["foo"], topics=TOPICS, now_ms=1), False),
        (lambda g: g.heartbeat("a", 1, None, rack_id="r1", topics=TOPICS, now_ms=1), False),
        (lambda g: g.heartbeat("a", 1, None, topics={**TOPICS, "foo": TopicMetadata(FOO, 4)}, now_ms=1), True),
        (lambda g: g.heartbeat("a", 1, None, topics={**TOPICS, "bar": TopicMetadata(BAR, 9)}, now_ms=1), False),
        (lambda g: g.heartbeat("a", 1, None, topics={}, now_ms=1), True),
        (lambda g: g.heartbeat("a", -1, None, topics=TOPICS, now_ms=1), True),
        (lambda g: g.expire(45_000), True),
        (lambda g: g.expire(44_999), False),
    ],
)
def test_what_bumps_the_group_epoch(change, bumps):
    group = joined("a")
    change(group)
    assert group.group_epoch == (2 if bumps else 1)


def test_session_timeout_expires_members_and_reports_them():
    group = joined("a", "b")
    group.heartbeat("b", 2, None, topics=TOPICS, now_ms=10_000)
    assert group.next_deadline_ms() == 45_000
    assert [member.member_id for member in group.expire(45_000)] == ["a"]
    assert group.next_deadline_ms() == 55_000
    assert group.expire(54_999) == ()
    assert [member.member_id for member in group.expire(55_000)] == ["b"]
    assert (group.state, group.next_deadline_ms(), group.subscription_metadata) == (ShareGroupState.EMPTY, None, {})


def test_describe():
    group = joined("a")
    group.heartbeat("a", 1, ["foo", "bar"], rack_id="r", client_id="c", client_host="/1.2.3.4", topics=TOPICS, now_ms=1)
    description = group.describe()
    assert (description.state, description.group_epoch, description.assignment_epoch) == (ShareGroupState.STABLE, 2, 2)
    assert description.assignor_name == "simple"
    (member,) = description.members
    assert (member.member_id, member.member_epoch, member.rack_id, member.client_id, member.client_host) == (
        "a", 2, "r", "c", "/1.2.3.4")
    assert member.subscribed_topic_names == {"foo", "bar"}
    assert member.assigned_partitions == {FOO: frozenset({0, 1, 2}), BAR: frozenset({0, 1})}
    assert description.topic_names == {FOO: "foo", BAR: "bar"}


@pytest.mark.parametrize(
    ("members", "partitions", "sizes"),
    [
        (1, 3, [3]),
        (2, 3, [2, 1]),
        (3, 3, [1, 1, 1]),
        (4, 3, [2, 2, 1, 1]),  # sharing 2: six assignments over four members
        (5, 2, [2, 1, 1, 1, 1]),  # sharing 3: six assignments over five members
        (7, 1, [1] * 7),  # every member shares the one partition
    ],
)
def test_assignor_balance_and_sharing(members, partitions, sizes):
    subscriptions = {f"m{i}": frozenset({FOO}) for i in range(members)}
    result = assign_share_partitions(subscriptions, {FOO: partitions}, {})
    assert sorted((len(result[m].get(FOO, ())) for m in subscriptions), reverse=True) == sizes
    holders = [sum(p in result[m].get(FOO, ()) for m in subscriptions) for p in range(partitions)]
    assert len(set(holders)) == 1 and holders[0] == -(-members // partitions)


def test_assignor_is_sticky_and_heterogeneous_is_balanced_per_topic():
    current = {"a": {FOO: frozenset({2})}, "b": {FOO: frozenset({0, 1})}}
    sticky = assign_share_partitions({"a": frozenset({FOO}), "b": frozenset({FOO})}, {FOO: 3}, current)
    assert sticky == current
    mixed = assign_share_partitions(
        {"a": frozenset({FOO}), "b": frozenset({FOO, BAR}), "c": frozenset({BAR})}, {FOO: 3, BAR: 2}, {})
    assert sorted(len(mixed[m][FOO]) for m in "ab") == [1, 2]
    assert [len(mixed[m][BAR]) for m in "bc"] == [1, 1]
    assert FOO not in mixed["c"] and BAR not in mixed["a"]
