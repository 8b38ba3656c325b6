"""``samsa log dump PATH... [--records] [--json]`` and ``samsa log verify DIR [--json]``.

``dump`` prints one line per batch in kafka-dump-log's words (``baseOffset: 0 lastOffset: 9
count: 10 ...``), with ``--records`` one ``| offset: ...`` line per record; ``.index`` and
``.timeindex`` files print their entries. Records of a ``__consumer_offsets-N`` segment (or any
with ``--offsets-decoder``) print their key and value decoded, as kafka-dump-log's
``--offsets-decoder``: ``key: {"type":1,"data":{"group":...}} payload: {"version":3,...}``.
Records of ``__cluster_metadata-0`` segments and of its ``.checkpoint`` snapshot files (or any
with ``--cluster-metadata-decoder``) print the KRaft record they frame, as kafka-dump-log's
``--cluster-metadata-decoder``: ``payload: {"type":"TopicRecord","version":0,"data":{...}}``
(field names are Samsa's snake_case ones). A transaction marker prints ``endTxnMarker: ABORT
coordinatorEpoch: 1`` instead of its binary key and payload, as kafka-dump-log does. ``verify`` checks every segment and index under DIR (a
partition directory or a whole log dir) and exits 1 naming each bad file and offset.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import struct
import sys
from pathlib import Path
from typing import Any, cast

from protocol.errors import InvalidRecordError
from protocol.records import BatchHeader, Record, decode_control_record
from storage.inspect import (
    BatchInfo,
    dump_log_file,
    partition_directories,
    read_offset_index,
    read_time_index,
    verify_partition_directory,
)

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_OFFSETS_DIRECTORY = re.compile(r"__consumer_offsets-\d+")
_METADATA_DIRECTORY = "__cluster_metadata-0"
_SNAPSHOT_SUFFIX = ".checkpoint"


def register(groups: Any) -> None:
    log = groups.add_parser("log", help="inspect segment files (dump, verify)")
    commands = log.add_subparsers(dest="command", metavar="COMMAND", required=True)
    dump = commands.add_parser("dump", help="print the batches of .log files and index entries")
    dump.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    dump.add_argument("--records", action="store_true", help="also print every record")
    dump.add_argument("--json", action="store_true", help="JSON lines for programs")
    dump.add_argument("--offsets-decoder", action="store_true",
                      help="decode __consumer_offsets records (automatic in its partition dirs)")
    dump.add_argument("--cluster-metadata-decoder", action="store_true",
                      help="decode KRaft metadata records (automatic in __cluster_metadata-0 and "
                           "for .checkpoint snapshots)")
    dump.set_defaults(handler=run_dump)
    verify = commands.add_parser("verify", help="check every segment and index under DIR")
    verify.add_argument("directory", type=Path, metavar="DIR")
    verify.add_argument("--json", action="store_true", help="JSON for programs")
    verify.set_defaults(handler=run_verify)


def run_dump(args: argparse.Namespace) -> int:
    status = 0
    for path in args.paths:
        if not path.is_file():
            print(f"samsa: error: {path}: no such file", file=sys.stderr)
            status = 1
            continue
        if not args.json:
            print(f"Dumping {path}")
        if path.name.endswith(".index") or path.name.endswith(".timeindex"):
            _dump_index(path, args.json)
            continue
        snapshot = path.name.endswith(_SNAPSHOT_SUFFIX)
        # a snapshot's batches are numbered from 0, whatever its name says
        report = dump_log_file(path, records=args.records, base_offset=0 if snapshot else None)
        directory = path.resolve().parent.name
        offsets = args.offsets_decoder or bool(_OFFSETS_DIRECTORY.fullmatch(directory))
        metadata = args.cluster_metadata_decoder or snapshot or directory == _METADATA_DIRECTORY
        for info in report.batches:
            _print_batch(path, info, args.json, offsets=offsets, metadata=metadata)
        for problem in report.problems:
            print(f"samsa: error: {problem}", file=sys.stderr)
            status = 1
    return status


def _dump_index(path: Path, as_json: bool) -> None:
    is_offset_index = path.name.endswith(".index")
    entries = read_offset_index(path) if is_offset_index else read_time_index(path)
    for first, second in entries:
        if as_json:
            names = ("offset", "position") if is_offset_index else ("timestamp", "offset")
            print(json.dumps({"file": str(path), names[0]: first, names[1]: second}))
        elif is_offset_index:
            print(f"offset: {first} position: {second}")
        else:
            print(f"timestamp: {first} offset: {second}")


def batch_fields(info: BatchInfo) -> dict[str, Any]:
    header: BatchHeader = info.header
    return {
        "baseOffset": header.base_offset,
        "lastOffset": header.last_offset,
        "count": header.records_count,
        "baseSequence": header.base_sequence,
        "lastSequence": header.last_sequence,
        "producerId": header.producer_id,
        "producerEpoch": header.producer_epoch,
        "partitionLeaderEpoch": header.partition_leader_epoch,
        "isTransactional": header.is_transactional,
        "isControl": header.is_control,
        "deleteHorizonMs": header.delete_horizon_ms,
        "position": info.position,
        _timestamp_name(header): header.max_timestamp,
        "size": header.size_in_bytes,
        "magic": header.magic,
        "compresscodec": _CODECS.get(int(header.compression), str(header.compression)),
        "crc": header.crc,
        "isvalid": info.crc_valid,
    }


def _timestamp_name(header: BatchHeader) -> str:
    return "LogAppendTime" if int(header.timestamp_type) == 1 else "CreateTime"


def record_fields(record: Record, header: BatchHeader) -> dict[str, Any]:
    return {
        "offset": record.offset,
        _timestamp_name(header): record.timestamp,
        "keySize": -1 if record.key is None else len(record.key),
        "valueSize": -1 if record.value is None else len(record.value),
        "headerKeys": [key for key, _ in record.headers],
        "key": _text(record.key),
        "payload": _text(record.value),
        "headers": {key: _text(value) for key, value in record.headers},
    }


def offsets_record_fields(record: Record) -> dict[str, Any]:
    """The key and payload of a ``__consumer_offsets`` record, decoded (raw text if unknown)."""
    from broker.group.offsets import decode_offsets_record  # heavy: imported only when dumping

    try:
        decoded = decode_offsets_record(record.key, record.value) if record.key else None
    except Exception as error:  # a damaged record still prints, with the reason
        return {"key": _text(record.key), "payload": f"<undecodable: {error}>"}
    if decoded is None:
        return {"key": _text(record.key), "payload": _text(record.value)}
    key, offset = decoded
    key_type = struct.unpack_from(">h", record.key or b"")[0]
    value_version = None if record.value is None else struct.unpack_from(">h", record.value)[0]
    key_data = {"group": key.group, "topic": key.topic, "partition": key.partition}
    payload = None
    if offset is not None:  # Kafka's OffsetCommitValue field names, as kafka-dump-log prints
        data: dict[str, Any] = {"offset": offset.committed_offset, "leaderEpoch": offset.leader_epoch,
                                "metadata": offset.metadata, "commitTimestamp": offset.commit_timestamp_ms}
        if offset.expire_timestamp_ms is not None:
            data["expireTimestamp"] = offset.expire_timestamp_ms
        payload = {"version": value_version, "data": data}
    return {"key": json.dumps({"type": key_type, "data": key_data}),
            "payload": None if payload is None else json.dumps(payload)}


def marker_fields(record: Record) -> dict[str, Any]:
    """A transaction marker's type and coordinator epoch, as kafka-dump-log prints them
    (``endTxnMarker: ABORT coordinatorEpoch: 1``)."""
    try:
        record_type, coordinator_epoch = decode_control_record(record)
    except InvalidRecordError as error:
        return {"payload": f"<undecodable: {error}>"}
    return {"endTxnMarker": record_type.name, "coordinatorEpoch": coordinator_epoch}


def metadata_record_fields(record: Record) -> dict[str, Any]:
    """The KRaft record framed in a metadata log record's value (raw text if unreadable)."""
    from replication.metadata.records import MetadataRecordError, decode_metadata_record

    if record.value is None:
        return {}
    try:
        message, version = decode_metadata_record(record.value)
    except MetadataRecordError as error:
        return {"payload": f"<undecodable: {error}>"}
    data = {name: value for name, value in dataclasses.asdict(cast(Any, message)).items()
            if name != "unknown_tagged_fields"}
    return {"payload": json.dumps({"type": type(message).__name__, "version": version,
                                   "data": data}, default=_json_value)}


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return str(value)  # UUIDs


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def _print_batch(path: Path, info: BatchInfo, as_json: bool, *, offsets: bool = False,
                 metadata: bool = False) -> None:
    fields = batch_fields(info)
    records = [record_fields(r, info.header) for r in info.records or ()]
    if offsets:
        for shown, record in zip(records, info.records or (), strict=True):
            shown.update(offsets_record_fields(record))
    elif info.header.is_control and info.header.producer_id >= 0:
        for shown, marker in zip(records, info.records or (), strict=True):
            del shown["key"], shown["payload"]  # binary; the marker is decoded instead
            shown.update(marker_fields(marker))
    elif metadata and not info.header.is_control:
        for shown, framed in zip(records, info.records or (), strict=True):
            shown.update(metadata_record_fields(framed))
    if as_json:
        print(json.dumps({"file": str(path), **fields, **({"records": records} if records else {})}))
        return
    print(" ".join(f"{name}: {_show(value)}" for name, value in fields.items()))
    for row in records:
        row.pop("headers")
        print("| " + " ".join(f"{name}: {_show(value)}" for name, value in row.items()))


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return "null" if value is None else str(value)


def run_verify(args: argparse.Namespace) -> int:
    root: Path = args.directory
    if not root.is_dir():
        print(f"samsa: error: {root}: not a directory", file=sys.stderr)
        return 1
    results = {str(d): verify_partition_directory(d) for d in partition_directories(root)}
    bad = sum(len(problems) for problems in results.values())
    if args.json:
        print(json.dumps({
            "directories": len(results),
            "problems": [{"path": str(p.path), "position": p.position, "offset": p.offset,
                          "reason": p.reason} for ps in results.values() for p in ps],
        }))
    else:
        for directory, problems in results.items():
            print(f"{directory}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
            for problem in problems:
                print(f"  {problem}")
        print(f"verified {len(results)} partition directories: {bad} problem(s)")
    return 1 if bad else 0
