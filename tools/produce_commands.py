"""``samsa produce TOPIC``: one record per line of standard input (kafka-console-producer).

    printf 'k1:hello\\nk2:world\\n' | samsa produce events --key-separator : --header source=cli

Each line (without its line ending) is a record's value, sent as bytes. With
``--key-separator SEP`` a line is ``KEY SEP VALUE`` (split at the first SEP; a line without
it is an error, as in Kafka); without it records have no key. ``--header KEY=VALUE``
(repeatable) puts headers on every record, ``--partition N`` sends them all to one partition,
``--compression`` sets ``compression.type``, and ``-X key=value`` any producer config
(Kafka's names). At the end the number of records produced goes to standard error.

Conditional appends (SamsaConditionalProduce; optimistic concurrency): with
``--expect-offset N`` the records are appended one at a time, the first only if the
partition's log end offset is N, each next one at the offset after it — so the input lands
contiguously from N or not at all past the first conflict. The partition is ``--partition``
(needed unless the topic has one partition). With ``--expect-key-offset N`` (needs
``--key-separator``) a record is appended only if the last record with its key is at offset N
(-1: no record has the key yet); a later record with a key this command already appended
expects that record. The first conflict stops the command with a one-line error naming the
actual offset: nothing of that record (or after it) was written.

Exit codes: 0 when every record was acknowledged; 1 with a one-line error when the broker
can't be reached (naming the addresses tried), the topic does not exist and the broker won't
create it, a line lacks the key separator, or a record was not delivered; 3 when a conditional
append's condition did not hold (an offset conflict).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from samsa.errors import KafkaError, OffsetConflictError
from samsa.types import RecordMetadata
from tools.client_options import add_client_options, client_config

if TYPE_CHECKING:  # the producer is imported when a command runs: `samsa --help` stays quick
    from samsa.producer import Producer

__all__ = ["CONFLICT_EXIT_CODE", "produce_conditionally", "produce_lines", "register",
           "split_lines"]

CONFLICT_EXIT_CODE = 3  # a conditional append's condition did not hold


def register(groups: Any) -> None:
    produce = groups.add_parser("produce", help="produce lines of standard input to a topic",
                                description=(__doc__ or "").split("\n\n")[0])
    produce.add_argument("topic", metavar="TOPIC")
    add_client_options(produce, json_output=False)
    produce.add_argument("--key-separator", metavar="SEP",
                         help="each line is KEY SEP VALUE (default: no key)")
    produce.add_argument("--header", dest="headers", metavar="KEY=VALUE", action="append",
                         type=_header, default=[], help="a header on every record (repeatable)")
    produce.add_argument("--partition", type=int, metavar="N",
                         help="send every record to partition N (default: the partitioner)")
    produce.add_argument("--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                         help="compression.type")
    conditions = produce.add_mutually_exclusive_group()
    conditions.add_argument("--expect-offset", type=_offset, metavar="N",
                            help="append only if the partition's log end offset is N (the "
                                 "records go one at a time to N, N+1, ...)")
    conditions.add_argument("--expect-key-offset", type=_key_offset, metavar="N",
                            help="append only if the last record with the record's key is at "
                                 "offset N (-1: none yet); needs --key-separator")
    produce.set_defaults(handler=run)


def _offset(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"an offset is >= 0, not {value}")
    return value


def _key_offset(text: str) -> int:
    value = int(text)
    if value < -1:
        raise argparse.ArgumentTypeError(f"an offset is >= -1 (-1: no record), not {value}")
    return value


def _header(text: str) -> tuple[str, bytes]:
    key, separator, value = text.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value.encode("utf-8")


def split_lines(stream: BinaryIO | Iterable[bytes], key_separator: bytes | None
                ) -> Iterator[tuple[bytes | None, bytes]]:
    """(key, value) of each line, line endings (``\\n`` or ``\\r\\n``) removed. ValueError
    naming the line number for a line without ``key_separator``."""
    for number, line in enumerate(stream, 1):
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        if key_separator is None:
            yield None, line
            continue
        key, separator, value = line.partition(key_separator)
        if not separator:
            text = line[:60].decode("utf-8", "replace")
            raise ValueError(f"no key separator {key_separator.decode()!r} on line {number}: "
                             f"{text!r}")
        yield key, value


class _Outcome:
    """Counts deliveries (callbacks run on the producer's loop thread, one at a time)."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0
        self.first_error: Exception | None = None

    def __call__(self, metadata: RecordMetadata | None, error: Exception | None) -> None:
        if error is None:
            self.delivered += 1
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = error


def produce_lines(producer: Producer, topic: str, records: Iterable[tuple[bytes | None, bytes]],
                  outcome: _Outcome, *, headers: list[tuple[str, bytes]],
                  partition: int | None) -> None:
    """Send every record (delivery reported to ``outcome``), then flush, also when reading
    the records fails."""
    header_list: list[tuple[str, bytes | None]] | None = list(headers) or None
    try:
        for key, value in records:
            producer.send(topic, value, key=key, partition=partition, headers=header_list,
                          on_delivery=outcome)
    finally:
        producer.flush()


def produce_conditionally(producer: Producer, topic: str,
                          records: Iterable[tuple[bytes | None, bytes]], outcome: _Outcome, *,
                          headers: list[tuple[str, bytes]], partition: int | None,
                          expected_offset: int | None, expected_key_offset: int | None) -> None:
    """Send the records one at a time with their conditions (see the module docstring),
    stopping at the first that fails; raises ``OffsetConflictError`` for a conflict."""
    header_list: list[tuple[str, bytes | None]] | None = list(headers) or None
    appended: dict[bytes | None, int] = {}  # key -> the offset this command appended it at
    for key, value in records:
        by_key = None if expected_key_offset is None else appended.get(key, expected_key_offset)
        future = producer.send(topic, value, key=key, partition=partition, headers=header_list,
                               expected_offset=expected_offset, expected_key_offset=by_key)
        try:
            metadata = future.result()
        except OffsetConflictError:
            raise
        except Exception as error:  # reported as any undelivered record; stop here
            outcome(None, error)
            return
        outcome(metadata, None)
        appended[key] = metadata.offset
        if expected_offset is not None:
            expected_offset = metadata.offset + 1


def _conditional_partition(args: argparse.Namespace, partitions: list[int]) -> int | None:
    if args.expect_key_offset is not None and args.key_separator is None:
        raise ValueError("--expect-key-offset needs --key-separator: the condition is on "
                         "each record's key")
    if args.expect_offset is not None and args.partition is None:
        if len(partitions) != 1:
            raise ValueError(f"--expect-offset needs --partition: topic {args.topic!r} has "
                             f"{len(partitions)} partitions")
        return 0
    return args.partition


def run(args: argparse.Namespace) -> int:
    extra = {"compression.type": args.compression} if args.compression else {}
    separator = args.key_separator.encode("utf-8") if args.key_separator is not None else None
    outcome = _Outcome()
    failure = None
    from samsa.producer import Producer

    with Producer(client_config(args, **extra)) as producer:
        partitions = producer.partitions_for(args.topic, wait=False)  # fail fast, say why
        if args.partition is not None and args.partition not in partitions:
            raise ValueError(f"topic {args.topic!r} has partitions 0..{len(partitions) - 1}, "
                             f"not {args.partition}")
        lines = split_lines(sys.stdin.buffer, separator)
        try:
            if args.expect_offset is None and args.expect_key_offset is None:
                produce_lines(producer, args.topic, lines, outcome, headers=args.headers,
                              partition=args.partition)
            else:
                produce_conditionally(
                    producer, args.topic, lines, outcome, headers=args.headers,
                    partition=_conditional_partition(args, partitions),
                    expected_offset=args.expect_offset,
                    expected_key_offset=args.expect_key_offset)
        except OffsetConflictError as conflict:
            print(f"{outcome.delivered} record(s) produced to {args.topic}", file=sys.stderr)
            print(f"samsa: error: offset conflict: {conflict}; the actual offset is "
                  f"{conflict.current_offset}", file=sys.stderr)
            return CONFLICT_EXIT_CODE
        except ValueError as error:  # a line without the key separator, a missing option
            failure = str(error)
    print(f"{outcome.delivered} record(s) produced to {args.topic}", file=sys.stderr)
    if outcome.failed:
        first = outcome.first_error
        reason = f"{type(first).__name__}: {first}" if isinstance(first, KafkaError) else first
        failure = f"{outcome.failed} record(s) not delivered: {reason}"
    if failure is not None:
        print(f"samsa: error: {failure}", file=sys.stderr)
        return 1
    return 0
