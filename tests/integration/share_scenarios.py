"""Share-group scenarios (KIP-932) run by Samsa's own clients against a broker, the same
against Apache Kafka 4.3.1 (tests/integration/kafka/test_share_consumer.py, the oracle) and
against Samsa (tests/integration/test_samsa_share_consumer.py): ``samsa.ShareConsumer``,
``AdminClient``'s share-group methods and ``samsa share-groups``.

Each scenario takes a bootstrap address and names of its own (a topic and a group), so the
scenarios of one module share one broker.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from samsa import AcknowledgeType, Producer, ShareConsumer
from samsa.admin import AdminClient, ConfigResource, NewTopic
from samsa.errors import IllegalStateError, KafkaError
from samsa.types import ShareConsumerRecord
from tools.cli import main as samsa_cli

__all__ = ["admin_and_cli_describe_the_group", "explicit_mode_rules",
           "release_redelivers_with_delivery_count_2", "two_members_share_every_record_once",
           "unsubscribe_releases_what_was_acquired"]

DEADLINE_S = 30
FAST = {"fetch.max.wait.ms": 200}


def prepare(bootstrap: str, topic: str, group: str, partitions: int) -> None:
    """Create ``topic`` and make ``group`` start from the earliest offsets (the group config
    ``share.auto.offset.reset``; Kafka's default, latest, would skip what is produced first)."""
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        admin.alter_configs(ConfigResource("group", group), {"share.auto.offset.reset": "earliest"})


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> set[tuple[int, int]]:
    """``count`` records spread over the partitions; their (partition, offset)."""
    with Producer(bootstrap_servers=bootstrap) as producer:
        futures = [producer.send(topic, key=str(i).encode(), value=f"value-{i}".encode(),
                                 partition=i % partitions) for i in range(count)]
        producer.flush()
        return {(future.result().partition, future.result().offset) for future in futures}


def poll_until(consumers: Sequence[ShareConsumer], done: Callable[[], bool],
               on_records: Callable[[int, list[ShareConsumerRecord]], None],
               timeout: float = 0.2) -> None:
    """Poll each consumer in turn until ``done()`` (AssertionError after DEADLINE_S)."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, "the share consumers did not get there in time"
        for index, consumer in enumerate(consumers):
            on_records(index, consumer.poll(timeout))


def wait_for_members(bootstrap: str, group: str, consumers: Sequence[ShareConsumer],
                     count: int | None = None) -> None:
    """Poll ``consumers`` until the group has ``count`` members (default: them), each with an
    assignment; what the polls return is dropped (call it before producing)."""
    wanted = len(consumers) if count is None else count
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        def assigned() -> bool:
            try:
                members = admin.describe_share_groups([group])[group].members
            except KafkaError:
                return False
            return len(members) == wanted and all(m.assignment for m in members)

        poll_until(consumers, assigned, lambda _, records: None)


def two_members_share_every_record_once(bootstrap: str, topic: str, group: str) -> None:
    """Two members of one share group: every record is delivered once (delivery count 1),
    each member gets some, their acknowledgements are taken, and once they have left (their
    sessions closed, which would release anything not accepted) a new member finds nothing."""
    prepare(bootstrap, topic, group, partitions=4)
    settings = {"bootstrap_servers": bootstrap, "group_id": group, "max_poll_records": 50, **FAST}
    with ShareConsumer(topic, **settings) as first, ShareConsumer(topic, **settings) as second:
        wait_for_members(bootstrap, group, [first, second])
        produced = produce(bootstrap, topic, 200, 4)
        delivered: list[list[ShareConsumerRecord]] = [[], []]
        poll_until([first, second],
                   lambda: sum(map(len, delivered)) >= len(produced),
                   lambda index, records: delivered[index].extend(records), timeout=0.1)
        for consumer, records in zip((first, second), delivered, strict=True):
            result = consumer.commit_sync()  # implicit mode: the last poll's records, ACCEPTed
            assert records and result and all(error is None for error in result.values())
    every = [(r.partition, r.offset) for records in delivered for r in records]
    assert sorted(every) == sorted(produced)  # each record once, none twice
    assert all(r.delivery_count == 1 for records in delivered for r in records)
    with ShareConsumer(topic, **settings) as late:
        wait_for_members(bootstrap, group, [late])
        assert late.poll(1.0) == []  # all were accepted


def release_redelivers_with_delivery_count_2(bootstrap: str, topic: str, group: str) -> None:
    """Explicit mode: a RELEASEd record comes back with delivery count 2; ACCEPTed ones
    don't; commit_sync reports no error."""
    prepare(bootstrap, topic, group, partitions=1)
    produce(bootstrap, topic, 5, 1)
    seen: list[tuple[int, int]] = []
    with ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                       share_acknowledgement_mode="explicit", **FAST) as consumer:
        def handle(_: int, records: list[ShareConsumerRecord]) -> None:
            for record in records:
                seen.append((record.offset, record.delivery_count))
                first_time_of_2 = record.offset == 2 and record.delivery_count == 1
                consumer.acknowledge(record, AcknowledgeType.RELEASE if first_time_of_2
                                     else AcknowledgeType.ACCEPT)

        poll_until([consumer], lambda: (2, 2) in seen, handle)
        assert all(error is None for error in consumer.commit_sync().values())
        assert consumer.poll(1.0) == []
    assert sorted(seen) == [(0, 1), (1, 1), (2, 1), (2, 2), (3, 1), (4, 1)]


def unsubscribe_releases_what_was_acquired(bootstrap: str, topic: str, group: str) -> None:
    """A member that unsubscribes after one poll of 2 records: the records it had acquired but
    not yet handed out come back (delivery count 2) when it subscribes again."""
    prepare(bootstrap, topic, group, partitions=1)
    produce(bootstrap, topic, 4, 1)
    got: list[ShareConsumerRecord] = []
    with ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group, max_poll_records=2,
                       **FAST) as consumer:
        poll_until([consumer], lambda: len(got) >= 2, lambda _, records: got.extend(records))
        consumer.unsubscribe()
        consumer.subscribe([topic])
        poll_until([consumer], lambda: len(got) >= 4, lambda _, records: got.extend(records))
    first = {r.offset for r in got[:2]}
    assert sorted(r.offset for r in got) == [0, 1, 2, 3]
    assert all(r.delivery_count == (1 if r.offset in first else 2) for r in got[2:]) or \
        all(r.delivery_count == 1 for r in got)  # a broker may have acquired only 2 at first


def explicit_mode_rules(bootstrap: str, topic: str, group: str) -> None:
    """Explicit mode: poll() refuses while a record is unacknowledged; REJECT archives a
    record (never delivered again); implicit mode refuses acknowledge()."""
    prepare(bootstrap, topic, group, partitions=1)
    produce(bootstrap, topic, 2, 1)
    settings = {"bootstrap_servers": bootstrap, "group_id": group, **FAST}
    with ShareConsumer(topic, share_acknowledgement_mode="explicit", **settings) as consumer:
        got: list[ShareConsumerRecord] = []
        poll_until([consumer], lambda: len(got) >= 2, lambda _, records: got.extend(records))
        consumer.acknowledge(got[0], AcknowledgeType.REJECT)
        try:
            consumer.poll(0)
        except IllegalStateError:
            pass
        else:
            raise AssertionError("poll() with an unacknowledged record must raise")
        consumer.acknowledge(got[1], AcknowledgeType.REJECT)
        assert consumer.poll(1.0) == []
    with ShareConsumer(**settings) as implicit:  # the default mode; no need to join
        try:
            implicit.acknowledge(got[0])
        except IllegalStateError:
            pass
        else:
            raise AssertionError("acknowledge() in implicit mode must raise")


def cli(bootstrap: str, *args: str) -> Any:
    """``samsa share-groups ARGS --json`` in this process; the JSON it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = samsa_cli(["share-groups", "--bootstrap-server", bootstrap, *args, "--json"])
    assert code == 0, out.getvalue()
    return json.loads(out.getvalue())


def admin_and_cli_describe_the_group(bootstrap: str, topic: str, group: str) -> None:
    """A share group with one member, as AdminClient and ``samsa share-groups`` show it;
    then, empty, its offsets reset and the group deleted."""
    prepare(bootstrap, topic, group, partitions=2)
    produced = produce(bootstrap, topic, 6, 2)
    with ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group, **FAST) as consumer:
        got: list[ShareConsumerRecord] = []
        poll_until([consumer], lambda: len(got) >= len(produced),
                   lambda _, records: got.extend(records))
        consumer.commit_sync()
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            assert group in [g.group_id for g in admin.list_share_groups()]
            described = admin.describe_share_groups([group])[group]
        assert described.state == "Stable" and described.group_epoch >= 1
        [member] = described.members
        assert member.member_id == consumer.member_id and member.subscribed_topics == (topic,)
        assert {tp.partition for tp in member.assignment} == {0, 1}
        members = cli(bootstrap, "--describe", "--group", group, "--members")["members"]
        assert [(m["consumer_id"], m["partitions"]) for m in members] == [(consumer.member_id, 2)]
        state = cli(bootstrap, "--describe", "--group", group, "--state")
        assert (state["state"], state["members"]) == ("Stable", 1)
        assert {"group": group, "state": "Stable"} in cli(bootstrap, "--list")
    offsets = cli(bootstrap, "--describe", "--group", group)["offsets"]
    assert {row["partition"] for row in offsets} == {0, 1}
    plan = cli(bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
               "--to-earliest", "--execute")
    assert [row["new_offset"] for row in plan["offsets"]] == [0, 0]
    after = cli(bootstrap, "--describe", "--group", group)["offsets"]
    assert [row["start_offset"] for row in after] == [0, 0]
    cli(bootstrap, "--delete", "--group", group)
    assert group not in [g["group"] for g in cli(bootstrap, "--list")]
