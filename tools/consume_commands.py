"""``samsa consume TOPIC``: kafka-console-consumer's job, with kcat's ``--format``.

- Where to start: ``--from-beginning``, or ``--offset N|earliest|latest`` (a number needs
  ``--partition``); the default is the end, as Kafka's console consumer does.
- ``--partition P`` reads that partition only. Without ``--group`` every partition of the
  topic is assigned (no group, nothing committed).
- ``--group G`` joins group G: its committed offsets are the starting point (``--from-beginning``
  then only decides where a partition with no committed offset starts) and the offsets are
  auto-committed as records are printed, and on exit.
- When to stop: ``--max-messages N``, ``--timeout-ms MS`` (no record for that long), Ctrl-C.
  The count of records printed goes to stderr, as Kafka's tool prints it.
- ``--key K``: only the records whose key is K (UTF-8), read by the partition's leader from its
  key indexes (Samsa's SamsaReadKey), not by reading the partition from the start. The
  partition is ``--partition P``, else the one the default partitioner sends K to; it starts
  at the beginning (``--offset N|latest`` to start elsewhere), prints the key's records up to
  the end, then follows: each new record of K is printed as it arrives (long polls) until
  ``--max-messages``, ``--timeout-ms`` or Ctrl-C. Not with ``--group``.
- Output: ``--format`` with ``{topic} {partition} {offset} {timestamp} {key} {value}
  {headers}`` (and ``\\t``, ``\\n`` escapes), default ``{value}``; keys and values are printed
  as UTF-8 text, ``null`` when absent; headers as ``k1:v1,k2:v2``. ``--json``: one JSON
  object per record.
"""

from __future__ import annotations

import argparse
import json
import os
import string
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from samsa.types import ConsumerRecord, TopicPartition
from tools.admin_support import admin_config, usage_error
from tools.client_options import add_client_options

if TYPE_CHECKING:
    from samsa.consumer import Consumer

__all__ = ["format_record", "record_document", "register"]

FIELDS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")
_ESCAPES = {"\\t": "\t", "\\n": "\n", "\\r": "\r", "\\\\": "\\"}


def register(groups: Any) -> None:
    consume = groups.add_parser("consume", help="print records of a topic")
    consume.add_argument("topic", metavar="TOPIC")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at the earliest offset (with --group: where none is committed)")
    start.add_argument("--offset", metavar="N|earliest|latest",
                       help="start offset (a number needs --partition)")
    consume.add_argument("--partition", type=int, metavar="P", help="read this partition only")
    consume.add_argument("--key", metavar="K",
                         help="only the records of key K, from the key indexes (from the "
                              "beginning, then following)")
    consume.add_argument("--group", dest="group_id", metavar="GROUP",
                         help="consume as a member of this group")
    consume.add_argument("--max-messages", type=int, metavar="N", help="exit after N records")
    consume.add_argument("--timeout-ms", type=int, metavar="MS",
                         help="exit when no record came for MS milliseconds")
    consume.add_argument("--format", default="{value}", metavar="FORMAT",
                         help="output line, with {key} {value} {partition} {offset} {timestamp}"
                              " {headers} {topic} (default: {value})")
    add_client_options(consume)
    consume.set_defaults(handler=run_consume)


def run_consume(args: argparse.Namespace) -> int:
    problem = _check_usage(args)
    if problem:
        return usage_error(args, problem)
    template = _unescape(args.format)
    from samsa.consumer import Consumer  # here: the other commands need not load the client

    settings = _settings(args)
    consumer = Consumer(config=settings)
    counter = _Counter()
    try:
        if args.key is not None:
            records = _key_records(consumer, args)
            counter.started = True
            _print_key_records(records, args, template, counter)
            return 0
        _start(consumer, args)
        counter.started = True
        _print_records(consumer, args, template, counter)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (| head): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the exit's flush does not fail again
        return 0
    finally:
        consumer.close()
        if counter.started:
            print(f"Processed a total of {counter.printed} messages", file=sys.stderr)
    return 0


class _Counter:
    started = False
    printed = 0


def _check_usage(args: argparse.Namespace) -> str | None:
    if args.group_id is not None and (args.partition is not None or args.offset is not None):
        return "--group cannot be combined with --partition or --offset"
    if args.key is not None and args.group_id is not None:
        return "--key cannot be combined with --group"
    if args.offset is not None and args.offset not in ("earliest", "latest"):
        if not args.offset.isdigit():
            return f"--offset must be a number, earliest or latest, not {args.offset!r}"
        if args.partition is None and args.key is None:
            return "--offset N needs --partition"
    if args.max_messages is not None and args.max_messages < 1:
        return "--max-messages must be at least 1"
    try:
        _unescape(args.format).format(topic="t", partition=0, offset=0, timestamp=0, key="",
                                      value="", headers="")
    except (KeyError, IndexError, ValueError) as exc:
        return f"bad --format {args.format!r}: {exc!r}; fields: {', '.join(FIELDS)}"
    return None


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    config = admin_config(args)
    config.setdefault("auto.offset.reset", "earliest" if args.from_beginning else "latest")
    if args.group_id is not None:
        config["group.id"] = args.group_id
    return config


def _start(consumer: Consumer, args: argparse.Namespace) -> None:
    if args.group_id is not None:
        _require_topic(consumer, args.topic)
        consumer.subscribe([args.topic])
        return
    partitions = [p.partition for p in _require_topic(consumer, args.topic)]
    if args.partition is not None:
        if args.partition not in partitions:
            raise ValueError(f"topic {args.topic!r} has no partition {args.partition}"
                             f" (it has {len(partitions)})")
        partitions = [args.partition]
    chosen = [TopicPartition(args.topic, p) for p in partitions]
    consumer.assign(chosen)
    if args.offset is not None and args.offset.isdigit():
        consumer.seek(chosen[0], int(args.offset))
    elif args.from_beginning or args.offset == "earliest":
        consumer.seek_to_beginning(*chosen)
    else:
        consumer.seek_to_end(*chosen)


def _require_topic(consumer: Consumer, topic: str) -> list[Any]:
    partitions = consumer.partitions_for(topic)
    if not partitions:
        raise ValueError(f"unknown topic {topic!r}")
    return partitions


def _print_records(consumer: Consumer, args: argparse.Namespace, template: str,
                   counter: _Counter) -> None:
    limit = args.max_messages
    idle_limit = None if args.timeout_ms is None else args.timeout_ms / 1000
    last_record = time.monotonic()
    out = sys.stdout
    while limit is None or counter.printed < limit:
        wait = 1.0 if idle_limit is None else max(0.0, min(1.0, last_record + idle_limit
                                                           - time.monotonic()))
        records = consumer.poll(wait, None if limit is None else limit - counter.printed)
        if records:
            last_record = time.monotonic()
            if args.json:
                text = "".join(json.dumps(record_document(r)) + "\n" for r in records)
            else:
                text = "".join(format_record(template, r) + "\n" for r in records)
            counter.printed += len(records)  # before the write: a reader may Ctrl-C us at once
            out.write(text)
            out.flush()
        elif idle_limit is not None and time.monotonic() - last_record >= idle_limit:
            break


def _key_records(consumer: Consumer, args: argparse.Namespace) -> Iterator[ConsumerRecord]:
    """The ``--key`` records: its partition's, from the start offset asked, then following."""
    from samsa.partitioner import partition_for_key

    key = args.key.encode()
    partitions = [p.partition for p in _require_topic(consumer, args.topic)]
    partition = args.partition
    if partition is None:
        partition = partition_for_key(key, len(partitions))
    elif partition not in partitions:
        raise ValueError(f"topic {args.topic!r} has no partition {partition}"
                         f" (it has {len(partitions)})")
    start = 0
    if args.offset is not None and args.offset.isdigit():
        start = int(args.offset)
    elif args.offset == "latest":
        tp = TopicPartition(args.topic, partition)
        start = consumer.end_offsets([tp])[tp]
    idle = None if args.timeout_ms is None else args.timeout_ms / 1000
    return consumer.subscribe_key(args.topic, partition, key, start, idle_timeout=idle)


def _print_key_records(records: Iterator[ConsumerRecord], args: argparse.Namespace,
                       template: str, counter: _Counter) -> None:
    out = sys.stdout
    for record in records:
        text = (json.dumps(record_document(record)) if args.json
                else format_record(template, record))
        counter.printed += 1  # before the write: a reader may Ctrl-C us at once
        out.write(text + "\n")
        out.flush()
        if args.max_messages is not None and counter.printed >= args.max_messages:
            return


def _unescape(text: str) -> str:
    for escaped, character in _ESCAPES.items():
        text = text.replace(escaped, character)
    return text


def _text(data: Any) -> str:
    if data is None:
        return "null"
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data).decode("utf-8", "backslashreplace")
    return str(data)


def format_record(template: str, record: ConsumerRecord) -> str:
    """``template`` (str.format fields of ``FIELDS``) filled in from ``record``."""
    fields = {
        "topic": record.topic, "partition": record.partition, "offset": record.offset,
        "timestamp": record.timestamp, "key": _text(record.key), "value": _text(record.value),
    }
    if "{headers" in template:
        fields["headers"] = ",".join(f"{k}:{_text(v)}" for k, v in record.headers)
    return string.Formatter().vformat(template, (), _Fields(fields))


class _Fields(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return ""


def record_document(record: ConsumerRecord) -> dict[str, Any]:
    """A record as a JSON-ready dict; keys, values and headers as UTF-8 text (or null)."""
    return {
        "topic": record.topic, "partition": record.partition, "offset": record.offset,
        "timestamp": record.timestamp, "timestamp_type": record.timestamp_type,
        "key": None if record.key is None else _text(record.key),
        "value": None if record.value is None else _text(record.value),
        "headers": [[k, None if v is None else _text(v)] for k, v in record.headers],
    }
