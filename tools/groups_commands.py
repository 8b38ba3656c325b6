"""``samsa groups list|describe|delete|reset-offsets``: kafka-consumer-groups.sh's jobs.

- ``list``: every group with its state and protocol type.
- ``describe GROUP``: the group's state, protocol and members, then one row per partition it
  has a committed offset for or a member is assigned: committed offset, log end offset
  (ListOffsets latest), lag (log end - committed), and the member that owns it.
- ``delete GROUP...``: groups without members, with their committed offsets.
- ``reset-offsets GROUP (--topic T[:P,...] ... | --all-topics) (--to-earliest | --to-latest |
  --to-offset N | --to-datetime ISO8601 | --shift-by N) [--execute]``: prints the plan (topic,
  partition, current offset, new offset); commits it only with ``--execute``. As Kafka's
  tool: refused unless the group is inactive (Empty, or Dead: unknown); a new offset outside
  [log start, log end] is moved to the nearer end, with a warning; ``--to-datetime`` with no
  record at or after that time goes to the log end; ``--shift-by`` needs a committed offset.

The plan is computed by ``plan_reset``, a pure function of the offsets fetched.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from samsa.errors import GroupIdNotFoundError, NonEmptyGroupError, UnknownTopicOrPartitionError
from samsa.types import OffsetAndMetadata, TopicPartition
from tools.admin_support import open_admin, timestamp_ms, topic_partitions, working
from tools.client_options import add_client_options, emit, print_table

if TYPE_CHECKING:
    from samsa.admin import AdminClient, GroupDescription, MemberDescription

__all__ = ["PlannedOffset", "ResetSpec", "lag_rows", "plan_reset", "register"]

INACTIVE_STATES = ("Empty", "Dead")
LAG_COLUMNS = ["topic", "partition", "current_offset", "log_end_offset", "lag", "consumer_id",
               "host", "client_id"]


def register(groups: Any) -> None:
    parser = groups.add_parser("groups", help="list, describe, delete consumer groups; reset offsets")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    listing = commands.add_parser("list", help="every consumer group and its state")
    listing.set_defaults(handler=run_list)
    describe = commands.add_parser("describe", help="members, committed offsets, lag")
    describe.add_argument("group_id", metavar="GROUP")
    describe.set_defaults(handler=run_describe)
    delete = commands.add_parser("delete", help="delete groups that have no members")
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    delete.set_defaults(handler=run_delete)
    reset = commands.add_parser("reset-offsets", help="move a group's committed offsets")
    _add_reset_options(reset)
    reset.set_defaults(handler=run_reset_offsets)
    for command in (listing, describe, delete, reset):
        add_client_options(command)


def _add_reset_options(reset: argparse.ArgumentParser) -> None:
    reset.add_argument("group_id", metavar="GROUP")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", type=topic_partitions, action="append", metavar="T[:P,...]",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every partition the group has a committed offset for")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    to.add_argument("--to-datetime", type=timestamp_ms, metavar="ISO8601",
                    help="the first offset at or after a time, e.g. 2024-05-01T12:00:00")
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (or minus)")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")


# --- list, delete ----------------------------------------------------------------------------

def run_list(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        listings = admin.list_groups()
    rows = [{"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type}
            for g in listings]
    emit(args, rows, ["group", "state", "protocol_type"])
    return 0


def run_delete(args: argparse.Namespace) -> int:
    groups = list(dict.fromkeys(args.groups))
    with open_admin(args) as admin:
        admin.delete_groups(groups)
    if args.json:
        print(json.dumps({"deleted": groups}))
    else:
        quoted = ", ".join(f"'{g}'" for g in groups)
        print(f"Deletion of requested consumer groups ({quoted}) was successful.")
    return 0


# --- describe --------------------------------------------------------------------------------

def lag_rows(group: GroupDescription, committed: Mapping[TopicPartition, OffsetAndMetadata],
             log_end: Mapping[TopicPartition, int | None]) -> list[dict[str, Any]]:
    """One row per partition the group has an offset for or a member owns (sorted), then
    one per member that owns nothing; lag is None when either offset is unknown."""
    owners = {tp: member for member in group.members for tp in member.assignment}
    rows = []
    for tp in sorted(set(committed) | set(owners)):
        current = committed[tp].offset if tp in committed else None
        end = log_end.get(tp)
        rows.append({"topic": tp.topic, "partition": tp.partition, "current_offset": current,
                     "log_end_offset": end,
                     "lag": None if current is None or end is None else end - current,
                     **_member_columns(owners.get(tp))})
    for member in group.members:
        if not member.assignment:
            rows.append({"topic": None, "partition": None, "current_offset": None,
                         "log_end_offset": None, "lag": None, **_member_columns(member)})
    return rows


def _member_columns(member: MemberDescription | None) -> dict[str, Any]:
    if member is None:
        return {"consumer_id": None, "host": None, "client_id": None}
    return {"consumer_id": member.member_id, "host": member.host, "client_id": member.client_id}


def _describe_group(admin: AdminClient, group_id: str) -> GroupDescription:
    group = admin.describe_groups([group_id])[group_id]
    if group.state == "Dead":
        raise GroupIdNotFoundError(f"consumer group '{group_id}' does not exist")
    return group


def _log_end_offsets(admin: AdminClient, partitions: Iterable[TopicPartition]
                     ) -> dict[TopicPartition, int | None]:
    """The log end offset of each partition (None for a topic that no longer exists)."""
    wanted = list(partitions)
    existing = set(admin.list_topics(include_internal=True))
    live = {tp: "latest" for tp in wanted if tp.topic in existing}
    found = admin.list_offsets(live) if live else {}
    return {tp: found[tp].offset if tp in found and found[tp].offset >= 0 else None
            for tp in wanted}


def run_describe(args: argparse.Namespace) -> int:
    with open_admin(args) as admin, working(args, f"describing group {args.group_id}"):
        group = _describe_group(admin, args.group_id)
        committed = admin.list_group_offsets(args.group_id)
        owned = {tp for member in group.members for tp in member.assignment}
        log_end = _log_end_offsets(admin, set(committed) | owned)
    rows = lag_rows(group, committed, log_end)
    summary = {"group": group.group_id, "state": group.state,
               "protocol_type": group.protocol_type or None, "protocol": group.protocol or None,
               "members": len(group.members)}
    if args.json:
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id, "host": m.host,
                    "assignment": [{"topic": t, "partition": p} for t, p in sorted(m.assignment)]}
                   for m in group.members]
        print(json.dumps({**summary, "members": members, "partitions": rows}, indent=2))
        return 0
    print_table([summary], ["group", "state", "protocol_type", "protocol", "members"])
    print()
    if not group.members:
        print(f"Consumer group '{group.group_id}' has no active members.")
    print_table(rows, LAG_COLUMNS)
    return 0


# --- reset-offsets ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ResetSpec:
    """Where to move: ``kind`` "earliest" | "latest" | "offset" | "datetime" | "shift",
    ``value`` the offset, the timestamp (ms) or the shift."""

    kind: str
    value: int = 0


@dataclass(frozen=True, slots=True)
class PlannedOffset:
    topic: str
    partition: int
    current: int | None
    new: int
    warning: str | None = None


def plan_reset(partitions: Sequence[TopicPartition], spec: ResetSpec, *,
               current: Mapping[TopicPartition, int], earliest: Mapping[TopicPartition, int],
               latest: Mapping[TopicPartition, int],
               by_time: Mapping[TopicPartition, int] | None = None) -> list[PlannedOffset]:
    """The new offset of each partition, as Kafka's ``ResetOffsetsUtils`` computes it
    (``by_time``: -1 where no record is at or after the time). ``ValueError`` when
    ``--shift-by`` meets a partition without a committed offset."""
    plan = []
    for tp in sorted(partitions):
        target, warning = _target(tp, spec, current, earliest, latest, by_time or {})
        plan.append(PlannedOffset(tp.topic, tp.partition, current.get(tp), target, warning))
    return plan


def _target(tp: TopicPartition, spec: ResetSpec, current: Mapping[TopicPartition, int],
            earliest: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
            by_time: Mapping[TopicPartition, int]) -> tuple[int, str | None]:
    if spec.kind == "earliest":
        return earliest[tp], None
    if spec.kind == "latest":
        return latest[tp], None
    if spec.kind == "datetime":
        found = by_time.get(tp, -1)
        return (found, None) if found >= 0 else (latest[tp], None)
    if spec.kind == "offset":
        return _within_log(tp, spec.value, earliest[tp], latest[tp])
    if spec.kind == "shift":
        if tp not in current:
            raise ValueError(f"cannot shift the offset of partition {tp.topic}-{tp.partition}: "
                             f"the group has no committed offset for it")
        return _within_log(tp, current[tp] + spec.value, earliest[tp], latest[tp])
    raise ValueError(f"unknown reset kind {spec.kind!r}")


def _within_log(tp: TopicPartition, offset: int, low: int, high: int) -> tuple[int, str | None]:
    name = f"{tp.topic}-{tp.partition}"
    if offset < low:
        return low, (f"new offset ({offset}) is lower than the earliest offset of {name}; "
                     f"{low} is used")
    if offset > high:
        return high, (f"new offset ({offset}) is higher than the latest offset of {name}; "
                      f"{high} is used")
    return offset, None


def _reset_spec(args: argparse.Namespace) -> ResetSpec:
    if args.to_earliest:
        return ResetSpec("earliest")
    if args.to_latest:
        return ResetSpec("latest")
    if args.to_offset is not None:
        return ResetSpec("offset", args.to_offset)
    if args.to_datetime is not None:
        return ResetSpec("datetime", args.to_datetime)
    return ResetSpec("shift", args.shift_by)


def _reset_partitions(admin: AdminClient, args: argparse.Namespace,
                      committed: Mapping[TopicPartition, OffsetAndMetadata]) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    topics = dict(args.topic)
    descriptions = admin.describe_topics(list(topics))
    partitions: list[TopicPartition] = []
    for topic, wanted in topics.items():
        have = [p.partition for p in descriptions[topic].partitions]
        for partition in have if wanted is None else wanted:
            if partition not in have:
                raise UnknownTopicOrPartitionError(f"unknown partition {topic}-{partition}")
            partitions.append(TopicPartition(topic, partition))
    return sorted(set(partitions))


def _offsets(admin: AdminClient, partitions: Sequence[TopicPartition], spec: int | str
             ) -> dict[TopicPartition, int]:
    found = admin.list_offsets(dict.fromkeys(partitions, spec)) if partitions else {}
    return {tp: answer.offset for tp, answer in found.items()}


def compute_plan(admin: AdminClient, args: argparse.Namespace) -> list[PlannedOffset]:
    """Check the group is inactive, fetch the offsets the spec needs, and plan."""
    group = admin.describe_groups([args.group_id])[args.group_id]
    if group.state not in INACTIVE_STATES:
        raise NonEmptyGroupError(
            f"Assignments can only be reset if the group '{args.group_id}' is inactive, "
            f"but the current state is {group.state}.")
    committed = admin.list_group_offsets(args.group_id)
    partitions = _reset_partitions(admin, args, committed)
    spec = _reset_spec(args)
    by_time = _offsets(admin, partitions, spec.value) if spec.kind == "datetime" else None
    return plan_reset(partitions, spec, current={tp: o.offset for tp, o in committed.items()},
                      earliest=_offsets(admin, partitions, "earliest"),
                      latest=_offsets(admin, partitions, "latest"), by_time=by_time)


def run_reset_offsets(args: argparse.Namespace) -> int:
    with open_admin(args) as admin, working(args, f"resetting offsets of {args.group_id}"):
        plan = compute_plan(admin, args)
        if args.execute and plan:
            admin.alter_group_offsets(args.group_id, {
                TopicPartition(p.topic, p.partition): p.new for p in plan})
    rows = [{"group": args.group_id, "topic": p.topic, "partition": p.partition,
             "current_offset": p.current, "new_offset": p.new} for p in plan]
    if args.json:
        print(json.dumps({"group": args.group_id, "executed": bool(args.execute), "offsets": rows,
                          "warnings": [p.warning for p in plan if p.warning]}, indent=2))
        return 0
    for p in plan:
        if p.warning:
            print(f"warning: {p.warning}", file=sys.stderr)
    print_table(rows, ["group", "topic", "partition", "current_offset", "new_offset"])
    if not args.execute:
        print("Dry run: nothing was changed; add --execute to commit these offsets.",
              file=sys.stderr)
    return 0
