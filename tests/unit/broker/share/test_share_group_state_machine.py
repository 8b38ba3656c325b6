"""ShareGroup against a simple model, driven by hypothesis: members join, heartbeat (changing
subscriptions or not), send stale or unknown epochs, leave and time out; topics appear and gain
partitions (the metadata view the caller passes).

The model knows who is a member, with which subscription and epoch, and what the group epoch
must be. After every step: the group epoch is the model's (it never decreases and bumps on each
membership, subscription or metadata change); member epochs never exceed it; a fenced or
unknown member gets its error and changes nothing; and whenever the target assignment is
current it covers every subscribed partition, gives no member a partition of a topic it does
not subscribe to, is balanced as Kafka's simple assignor promises (each partition shared by
ceil(members / partitions) members of its pool, sizes within one) and is a fixed point of the
assignor whatever the order of its inputs. The last tests show the checker catches an assignor
that forgets a partition and a group that does not bump its epoch when a member leaves."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from broker.share.share_assignor import Assignment, assign_share_partitions, assignment_pools
from broker.share.share_group import ShareGroup, ShareGroupConfig, TopicMetadata
from protocol.errors import ErrorCode

MEMBERS = ("m1", "m2", "m3", "m4", "m5")
TOPIC_NAMES = ("t1", "t2", "t3")
SESSION_MS = 1_000
subscriptions = st.frozensets(st.sampled_from(TOPIC_NAMES), min_size=1)


def machine_for(group_class: type[ShareGroup]) -> type[RuleBasedStateMachine]:
    class ShareGroupMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.group = group_class("g", ShareGroupConfig(session_timeout_ms=SESSION_MS, max_size=4))
            self.now_ms = 0
            self.topics: dict[str, TopicMetadata] = {"t1": TopicMetadata(UUID(int=1), 2)}
            self.epoch = 0
            self.live: dict[str, tuple[int, frozenset[str], int]] = {}  # id -> (epoch, names, deadline)
            self.metadata: dict[str, TopicMetadata] = {}
            self.last_group_epoch = 0

        # ---- model helpers ----------------------------------------------------------------

        def metadata_changed(self) -> bool:
            names = set().union(*(names for _, names, _ in self.live.values()))
            metadata = {name: self.topics[name] for name in names if name in self.topics}
            changed = metadata != self.metadata
            self.metadata = metadata
            return changed

        def snapshot(self) -> tuple[object, ...]:
            group = self.group
            return (group.group_epoch, group.assignment_epoch, dict(group.members),
                    dict(group.target_assignment), dict(group.subscription_metadata), group.next_deadline_ms())

        # ---- rules ------------------------------------------------------------------------

        @rule(member_id=st.sampled_from(MEMBERS), names=subscriptions)
        def join(self, member_id: str, names: frozenset[str]) -> None:
            if member_id in self.live:
                return
            before = self.snapshot()
            result = self.group.heartbeat(member_id, 0, sorted(names), topics=self.topics, now_ms=self.now_ms)
            if len(self.live) >= 4:
                assert result.error == ErrorCode.GROUP_MAX_SIZE_REACHED
                assert self.snapshot() == before
                return
            assert result.error == ErrorCode.NONE and result.assignment is not None
            self.live[member_id] = (result.member_epoch, names, self.now_ms + SESSION_MS)
            self.metadata_changed()
            self.epoch += 1

        @precondition(lambda self: self.live)
        @rule(data=st.data(), names=st.none() | subscriptions)
        def heartbeat(self, data: st.DataObject, names: frozenset[str] | None) -> None:
            member_id = data.draw(st.sampled_from(sorted(self.live)))
            epoch, old_names, _ = self.live[member_id]
            result = self.group.heartbeat(member_id, epoch, None if names is None else sorted(names),
                                          topics=self.topics, now_ms=self.now_ms)
            assert result.error == ErrorCode.NONE
            new_names = old_names if names is None else names
            self.live[member_id] = (result.member_epoch, new_names, self.now_ms + SESSION_MS)
            if self.metadata_changed() or new_names != old_names:
                self.epoch += 1
            assert result.member_epoch == self.group.assignment_epoch == self.epoch

        @rule(member_id=st.sampled_from(MEMBERS), ahead=st.booleans())
        def stale_or_unknown(self, member_id: str, ahead: bool) -> None:
            before = self.snapshot()
            if member_id in self.live:
                epoch = self.live[member_id][0]
                sent, expected = (epoch + 1, ErrorCode.FENCED_MEMBER_EPOCH) if ahead else (epoch - 2,
                                                                                         ErrorCode.FENCED_MEMBER_EPOCH)
                if sent <= 0 or sent == self.group.members[member_id].previous_member_epoch:
                    return
            else:
                sent, expected = (5, ErrorCode.UNKNOWN_MEMBER_ID) if ahead else (-1, ErrorCode.UNKNOWN_MEMBER_ID)
                if ahead and len(self.live) >= 4:
                    expected = ErrorCode.GROUP_MAX_SIZE_REACHED
            result = self.group.heartbeat(member_id, sent, None, topics=self.topics, now_ms=self.now_ms)
            assert result.error == expected
            assert self.snapshot() == before

        @precondition(lambda self: self.live)
        @rule(data=st.data())
        def leave(self, data: st.DataObject) -> None:
            member_id = data.draw(st.sampled_from(sorted(self.live)))
            result = self.group.heartbeat(member_id, -1, None, topics=self.topics, now_ms=self.now_ms)
            assert (result.error, result.member_epoch) == (ErrorCode.NONE, -1)
            del self.live[member_id]
            self.metadata_changed()
            self.epoch += 1

        @rule(elapsed_ms=st.integers(0, 2 * SESSION_MS))
        def time_passes(self, elapsed_ms: int) -> None:
            self.now_ms += elapsed_ms
            expired = sorted(m for m, (_, _, deadline) in self.live.items() if deadline <= self.now_ms)
            removed = self.group.expire(self.now_ms, topics=self.topics)
            assert [member.member_id for member in removed] == expired
            for member_id in expired:
                del self.live[member_id]
                self.epoch += 1
            if expired:
                self.metadata_changed()

        @rule(name=st.sampled_from(TOPIC_NAMES), more=st.integers(1, 3))
        def topic_grows(self, name: str, more: int) -> None:
            """Create the topic or add partitions; the group notices at the next heartbeat."""
            old = self.topics.get(name)
            count = more if old is None else old.partition_count + more
            self.topics[name] = TopicMetadata(UUID(int=TOPIC_NAMES.index(name) + 1), count)

        # ---- invariants -------------------------------------------------------------------

        @invariant()
        def epochs(self) -> None:
            group = self.group
            assert group.group_epoch == self.epoch >= self.last_group_epoch
            self.last_group_epoch = group.group_epoch
            assert group.assignment_epoch <= group.group_epoch
            assert set(group.members) == set(self.live)
            for member in group.members.values():
                assert member.member_epoch <= group.assignment_epoch
                assert member.subscribed_topic_names == self.live[member.member_id][1]
                if member.member_epoch == group.assignment_epoch:
                    assert member.assigned_partitions == group.target_assignment.get(member.member_id, {})

        @invariant()
        def target_assignment(self) -> None:
            group = self.group
            if group.assignment_epoch != group.group_epoch:
                return  # not recomputed yet: Kafka recomputes at the next heartbeat
            assert set(group.target_assignment) == set(group.members)
            metadata = group.subscription_metadata
            subscribed = {member_id: frozenset(metadata[name].topic_id for name in member.subscribed_topic_names
                                               if name in metadata)
                          for member_id, member in group.members.items()}
            counts = {topic.topic_id: topic.partition_count for topic in metadata.values()}
            target = group.target_assignment
            for member_id, assignment in target.items():
                assert set(assignment) <= subscribed[member_id]
                assert all(partition < counts[topic_id] for topic_id, ps in assignment.items() for partition in ps)
            for partitions, members in assignment_pools(subscribed, counts):
                sharing = -(-len(members) // len(partitions)) if partitions else 0
                for topic_id, partition in partitions:
                    holders = [m for m in members if partition in target[m].get(topic_id, ())]
                    assert len(holders) == sharing >= 1
                sizes = [sum(partition in target[m].get(t, ()) for t, partition in partitions) for m in members]
                assert max(sizes) - min(sizes) <= 1
            reordered = dict(reversed(list(subscribed.items())))
            assert assign_share_partitions(reordered, counts, target) == target

    return ShareGroupMachine


SETTINGS = settings(max_examples=150, stateful_step_count=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
TestShareGroup = machine_for(ShareGroup).TestCase
TestShareGroup.settings = SETTINGS


class ForgetsAPartition(ShareGroup):
    """Its assignor drops the last partition of the group."""

    def _compute_target_assignment(self) -> None:
        super()._compute_target_assignment()
        for member_id, assignment in self.target_assignment.items():
            self.target_assignment[member_id] = _without_last(assignment)


def _without_last(assignment: Assignment) -> Assignment:
    if not assignment:
        return assignment
    last_topic = max(assignment)
    return {**assignment, last_topic: assignment[last_topic] - {max(assignment[last_topic])}}


class NoBumpOnLeave(ShareGroup):
    def _remove_member(self, member_id: str, topics: dict[str, TopicMetadata] | None) -> None:  # type: ignore[override]
        super()._remove_member(member_id, topics)
        self.group_epoch -= 1


BREAKING = settings(max_examples=300, stateful_step_count=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("broken", [ForgetsAPartition, NoBumpOnLeave])
def test_the_checker_catches_a_broken_rule(broken: type[ShareGroup]) -> None:
    with pytest.raises(AssertionError):
        run_state_machine_as_test(machine_for(broken), settings=BREAKING)
