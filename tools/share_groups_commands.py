"""``samsa share-groups``: kafka-share-groups.sh's jobs, with its options.

- ``--list [--state]``: every share group (with ``--state``: and its state).
- ``--describe --group G [--offsets | --members | --state | --in-flight]``: the group's start
  offsets and lag per partition (the default, ``--offsets``; from a Samsa broker also the
  in-flight, acquired and dead-lettering records and the highest delivery count, from each
  partition's leader), each in-flight range (``--in-flight``, Samsa's: state, delivery count,
  holder, lock deadline, dead-letter reason), its members (client, host, member epoch,
  assignment), or its state (coordinator, assignor, state, group and assignment epochs,
  member count).
- ``--reset-offsets --group G (--topic T[:P,...] ... | --all-topics) (--to-earliest |
  --to-latest | --to-datetime ISO8601) [--dry-run | --execute]``: prints the plan (topic,
  partition, current start offset, new start offset); sets it only with ``--execute``. As
  Kafka's tool: refused unless the group is empty; ``--to-datetime`` with no record at or
  after that time goes to the log end.
- ``--delete-offsets --group G --topic T ...``: forget the group's start offsets of topics.
- ``--delete --group G ...``: delete share groups that have no members.
- ``--redrive (--dead-letter-topic DLQ | --group G) [--to-topic T] [--dry-run | --execute]``
  (Samsa's): produce a dead-letter topic's records back to their source topics, with its
  progress committed (``tools.share_redrive``).

Every action takes the client options (``--bootstrap-server``, ``--command-config``, ``-X``)
and ``--json`` (what a program reads) instead of the tables people read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from samsa.errors import (
    GroupIdNotFoundError,
    NonEmptyGroupError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from samsa.types import TopicPartition
from tools.admin_support import open_admin, timestamp_ms, topic_partitions, usage_error, working
from tools.client_options import add_client_options, emit, print_table
from tools.groups_commands import PlannedOffset, ResetSpec, plan_reset

if TYPE_CHECKING:
    from samsa.admin import AdminClient, ShareGroupDescription, SharePartitionOffset
    from samsa.share_partitions import SharePartitionState

__all__ = ["in_flight_rows", "member_rows", "offset_rows", "register", "state_row"]

OFFSET_COLUMNS = ["group", "topic", "partition", "leader_epoch", "start_offset", "lag", "in_flight",
                  "acquired", "dead_lettering", "max_delivery_count"]
IN_FLIGHT_COLUMNS = ["group", "topic", "partition", "first_offset", "last_offset", "state", "delivery_count",
                     "member_id", "lock_deadline", "reason"]
MEMBER_COLUMNS = ["group", "consumer_id", "host", "client_id", "member_epoch", "partitions",
                  "assignment"]
STATE_COLUMNS = ["group", "coordinator", "assignment_strategy", "state", "group_epoch",
                 "assignment_epoch", "members"]
RESET_COLUMNS = ["group", "topic", "partition", "current_offset", "new_offset"]


def register(groups: Any) -> None:
    parser = groups.add_parser(
        "share-groups", help="list, describe, delete share groups; reset their offsets",
        description="Share groups (KIP-932), as kafka-share-groups.sh.")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list every share group")
    action.add_argument("--describe", action="store_true", help="describe share groups")
    action.add_argument("--reset-offsets", action="store_true", help="reset a group's start offsets")
    action.add_argument("--delete-offsets", action="store_true",
                        help="delete a group's start offsets of topics")
    action.add_argument("--delete", action="store_true", help="delete share groups")
    action.add_argument("--redrive", action="store_true",
                        help="produce a dead-letter topic's records back to their source topics")
    parser.add_argument("--dead-letter-topic", metavar="DLQ",
                        help="with --redrive: the dead-letter topic (default: the group's "
                             "samsa.share.dead.letter.topic)")
    parser.add_argument("--to-topic", metavar="T",
                        help="with --redrive: produce every record to T instead of its source topic")
    parser.add_argument("--group", dest="group_ids", action="append", metavar="GROUP", help="a share group (repeatable)")
    parser.add_argument("--topic", action="append", type=topic_partitions, metavar="T[:P,...]",
                        help="a topic, or some of its partitions (repeatable)")
    parser.add_argument("--all-topics", action="store_true",
                        help="with --reset-offsets: every topic the group has offsets for")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="with --describe: start offsets, lag")
    view.add_argument("--members", action="store_true", help="with --describe: the members")
    view.add_argument("--in-flight", action="store_true",
                      help="with --describe: each share partition's in-flight ranges (Samsa brokers)")
    view.add_argument("--state", action="store_true",
                      help="with --describe: the group's state; with --list: each group's state")
    to = parser.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-datetime", type=timestamp_ms, metavar="ISO8601",
                    help="the first offset at or after a time, e.g. 2024-05-01T12:00:00")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="set the new offsets; with --redrive: redrive")
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    add_client_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.list:
        return run_list(args)
    if args.redrive:
        from tools.share_redrive import run_redrive

        return run_redrive(args)
    if not args.group_ids:
        return usage_error(args, "--group is required (except with --list)")
    if args.describe:
        return run_describe(args)
    if args.delete:
        return run_delete(args)
    if len(args.group_ids) != 1:
        return usage_error(args, "give exactly one --group")
    if args.delete_offsets:
        if not args.topic or any(partitions is not None for _, partitions in args.topic):
            return usage_error(args, "--delete-offsets needs --topic T (whole topics)")
        return run_delete_offsets(args)
    if not (args.to_earliest or args.to_latest or args.to_datetime is not None):
        return usage_error(args, "--reset-offsets needs --to-earliest, --to-latest or --to-datetime")
    if bool(args.topic) == args.all_topics:
        return usage_error(args, "--reset-offsets needs --topic T ... or --all-topics")
    return run_reset_offsets(args)


# --- list ------------------------------------------------------------------------------------

def run_list(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        listings = admin.list_share_groups()
    rows = [{"group": g.group_id, "state": g.state} for g in listings]
    if args.json or args.state:
        emit(args, rows, ["group", "state"])
    else:
        for row in rows:
            print(row["group"])
    return 0


# --- describe --------------------------------------------------------------------------------

def offset_rows(group_id: str, offsets: Mapping[TopicPartition, SharePartitionOffset],
                states: Mapping[TopicPartition, SharePartitionState] | None = None) -> list[dict[str, Any]]:
    """One row per partition with a start offset, sorted; with ``states`` (a Samsa broker's
    in-flight windows) the in-flight, acquired and dead-lettering records and the highest
    delivery count (None where the leader has not loaded the share partition)."""
    rows = []
    for tp, o in sorted(offsets.items()):
        state = (states or {}).get(tp)
        loaded = state is not None and state.loaded
        rows.append({"group": group_id, "topic": tp.topic, "partition": tp.partition,
                     "leader_epoch": o.leader_epoch, "start_offset": o.start_offset, "lag": o.lag,
                     "in_flight": state.in_flight_records if loaded else None,
                     "acquired": state.acquired_records if loaded else None,
                     "dead_lettering": state.dead_lettering_records if loaded else None,
                     "max_delivery_count": state.max_delivery_count if loaded else None})
    return rows


def in_flight_rows(group_id: str, states: Mapping[TopicPartition, SharePartitionState]) -> list[dict[str, Any]]:
    """One row per in-flight range of each share partition, in offset order."""
    from datetime import UTC, datetime

    return [{"group": group_id, "topic": tp.topic, "partition": tp.partition,
             "first_offset": r.first_offset, "last_offset": r.last_offset, "state": r.state,
             "delivery_count": r.delivery_count, "member_id": r.member_id,
             "lock_deadline": None if r.lock_deadline_ms is None else
             datetime.fromtimestamp(r.lock_deadline_ms / 1000, UTC).isoformat(timespec="milliseconds"),
             "reason": r.reason}
            for tp, state in sorted(states.items()) for r in state.ranges]


def _states(admin: AdminClient, group_id: str, partitions: Sequence[TopicPartition]
            ) -> dict[TopicPartition, SharePartitionState] | None:
    """The in-flight windows, or None from brokers without Samsa's DescribeSharePartitions."""
    try:
        return admin.describe_share_partitions(group_id, partitions)
    except UnsupportedVersionError:
        return None


def member_rows(group: ShareGroupDescription) -> list[dict[str, Any]]:
    """One row per member, sorted by member id; the assignment as ``topic:p,p;topic:p``."""
    rows = []
    for member in sorted(group.members, key=lambda m: m.member_id):
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(member.assignment):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        assignment = ";".join(f"{t}:{','.join(map(str, p))}" for t, p in by_topic.items())
        rows.append({"group": group.group_id, "consumer_id": member.member_id,
                     "host": member.host, "client_id": member.client_id,
                     "member_epoch": member.member_epoch, "partitions": len(member.assignment),
                     "assignment": assignment or None})
    return rows


def state_row(group: ShareGroupDescription, coordinator: str) -> dict[str, Any]:
    return {"group": group.group_id, "coordinator": coordinator,
            "assignment_strategy": group.assignor_name or None, "state": group.state,
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "members": len(group.members)}


def _coordinator(admin: AdminClient, node_id: int) -> str:
    brokers = {b.node_id: b for b in admin.describe_cluster().brokers}
    broker = brokers.get(node_id)
    return f"{broker.address} ({node_id})" if broker is not None else f"({node_id})"


def run_describe(args: argparse.Namespace) -> int:
    group_ids = list(dict.fromkeys(args.group_ids))
    documents: list[dict[str, Any]] = []
    with open_admin(args) as admin, working(args, "describing share groups"):
        groups = admin.describe_share_groups(group_ids)
        for group_id in group_ids:
            group = groups[group_id]
            if group.state == "Dead":
                raise GroupIdNotFoundError(f"share group '{group_id}' does not exist")
            document: dict[str, Any] = {"group": group_id, "state": group.state}
            if args.members:
                document["members"] = member_rows(group)
            elif args.in_flight:
                offsets = admin.describe_share_group_offsets(group_id)
                document["in_flight"] = in_flight_rows(group_id, _states(admin, group_id, list(offsets)) or {})
            elif args.state:
                document.update(state_row(group, _coordinator(admin, group.coordinator_id)))
            else:
                offsets = admin.describe_share_group_offsets(group_id)
                document["offsets"] = offset_rows(group_id, offsets, _states(admin, group_id, list(offsets)))
            documents.append(document)
    if args.json:
        print(json.dumps(documents if len(documents) > 1 else documents[0], indent=2))
        return 0
    for index, document in enumerate(documents):
        if index:
            print()
        _print_description(document, args)
    return 0


def _print_description(document: dict[str, Any], args: argparse.Namespace) -> None:
    group_id = document["group"]
    if args.state:
        print_table([document], STATE_COLUMNS)
    elif args.in_flight:
        print_table(document["in_flight"], IN_FLIGHT_COLUMNS)
    elif args.members:
        if not document["members"]:
            print(f"Share group '{group_id}' has no active members.")
            return
        print_table(document["members"], MEMBER_COLUMNS)
    else:
        if document["state"] == "Empty":
            print(f"Share group '{group_id}' has no active members.")
        print_table(document["offsets"], OFFSET_COLUMNS)


# --- delete, delete-offsets ------------------------------------------------------------------

def run_delete(args: argparse.Namespace) -> int:
    groups = list(dict.fromkeys(args.group_ids))
    with open_admin(args) as admin:
        admin.delete_share_groups(groups)
    if args.json:
        print(json.dumps({"deleted": groups}))
    else:
        quoted = ", ".join(f"'{g}'" for g in groups)
        print(f"Deletion of requested share groups ({quoted}) was successful.")
    return 0


def run_delete_offsets(args: argparse.Namespace) -> int:
    group_id = args.group_ids[0]
    topics = list(dict.fromkeys(topic for topic, _ in args.topic))
    with open_admin(args) as admin:
        admin.delete_share_group_offsets(group_id, topics)
    rows = [{"topic": topic, "status": "Successful"} for topic in topics]
    emit(args, rows, ["topic", "status"], document={"group": group_id, "deleted": topics})
    return 0


# --- reset-offsets ---------------------------------------------------------------------------

def _reset_spec(args: argparse.Namespace) -> ResetSpec:
    if args.to_earliest:
        return ResetSpec("earliest")
    if args.to_latest:
        return ResetSpec("latest")
    return ResetSpec("datetime", args.to_datetime)


def _partitions(admin: AdminClient, args: argparse.Namespace,
                current: Mapping[TopicPartition, int]) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(current)
    topics = dict(args.topic)
    descriptions = admin.describe_topics(list(topics))
    chosen: set[TopicPartition] = set()
    for topic, wanted in topics.items():
        have = [p.partition for p in descriptions[topic].partitions]
        for partition in have if wanted is None else wanted:
            if partition not in have:
                raise UnknownTopicOrPartitionError(f"unknown partition {topic}-{partition}")
            chosen.add(TopicPartition(topic, partition))
    return sorted(chosen)


def _offsets(admin: AdminClient, partitions: Sequence[TopicPartition], spec: int | str
             ) -> dict[TopicPartition, int]:
    found = admin.list_offsets(dict.fromkeys(partitions, spec)) if partitions else {}
    return {tp: answer.offset for tp, answer in found.items()}


def compute_plan(admin: AdminClient, args: argparse.Namespace) -> list[PlannedOffset]:
    """Check the group is empty, fetch the offsets the spec needs, and plan."""
    group_id = args.group_ids[0]
    try:
        group = admin.describe_share_groups([group_id])[group_id]
        state = group.state
    except GroupIdNotFoundError:
        state = "Dead"  # a group that does not exist yet may be given offsets
    if state not in ("Empty", "Dead"):
        raise NonEmptyGroupError(
            f"Share group '{group_id}' is not empty (state {state}): its offsets can be reset "
            f"only while it has no members.")
    current = {tp: o.start_offset
               for tp, o in admin.describe_share_group_offsets(group_id).items()}
    partitions = _partitions(admin, args, current)
    spec = _reset_spec(args)
    by_time = _offsets(admin, partitions, spec.value) if spec.kind == "datetime" else None
    return plan_reset(partitions, spec, current=current,
                      earliest=_offsets(admin, partitions, "earliest"),
                      latest=_offsets(admin, partitions, "latest"), by_time=by_time)


def run_reset_offsets(args: argparse.Namespace) -> int:
    group_id = args.group_ids[0]
    with open_admin(args) as admin, working(args, f"resetting offsets of {group_id}"):
        plan = compute_plan(admin, args)
        if args.execute and plan:
            admin.alter_share_group_offsets(group_id, {
                TopicPartition(p.topic, p.partition): p.new for p in plan})
    rows = [{"group": group_id, "topic": p.topic, "partition": p.partition,
             "current_offset": p.current, "new_offset": p.new} for p in plan]
    if args.json:
        print(json.dumps({"group": group_id, "executed": bool(args.execute), "offsets": rows},
                         indent=2))
        return 0
    print_table(rows, RESET_COLUMNS)
    if not args.execute:
        print("Dry run: nothing was changed; add --execute to set these offsets.", file=sys.stderr)
    return 0
